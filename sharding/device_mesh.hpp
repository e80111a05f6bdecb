#pragma once
// The device mesh's process groups (the arithmetic is parallel/mesh_layout's): for now its
// data-parallel dimensions, hybrid sharding (FSDP2/torchtitan's HSDP): the world's ranks form
// `dp_replicate` shard groups of `dp_shard` consecutive ranks each (ideally one node each). A
// unit's parameters are sharded within a shard group; the shard groups hold replicas and all-reduce
// their gradient shards over the replica groups (the ranks with the same place in every shard
// group). dp_shard = world is FSDP; dp_shard = 1 is DDP.
#include <memory>
#include <string>

#include "collectives/process_group.hpp"
#include "parallel/mesh_layout.hpp"

namespace st {

class DeviceMesh {
 public:
  // Collective over `world` (whose size must be shard × replicate). With replicate = 1 the
  // shard group is the world itself; otherwise both groups are split from it.
  DeviceMesh(ProcessGroup& world, MeshShape shape);

  const MeshShape& shape() const { return shape_; }
  ProcessGroup& world() { return world_; }
  ProcessGroup& shard_group() { return shard_ ? *shard_ : world_; }
  // nullptr when there is one replica (nothing to all-reduce).
  ProcessGroup* replica_group() { return replica_.get(); }
  // Which shard group (replica) this rank belongs to; replica 0 writes checkpoints.
  int replica_index() const;
  // This rank's place among the ranks that read different rows of a batch (dp_replicate x
  // dp_shard; the tp and pp ranks of one place read the same rows), and their number.
  int data_rank() const;
  int data_ranks() const { return shape_.data_parallel(); }
  // True when some shard group has ranks on more than one node.
  bool shard_groups_span_nodes() const;
  // "HSDP: 2 replicas x 2 shards" and the like, for summaries.
  std::string describe() const;
  // "node 0: ranks 0-1, node 1: ranks 2-3": the world's node map.
  std::string node_map() const;

 private:
  ProcessGroup& world_;
  MeshShape shape_;
  std::unique_ptr<ProcessGroup> shard_, replica_;
};

}  // namespace st
