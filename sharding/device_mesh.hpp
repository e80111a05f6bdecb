#pragma once
// The 2-D device mesh of hybrid sharding (FSDP2/torchtitan's HSDP): the world's ranks form
// `replicate` shard groups of `shard` consecutive ranks each (ideally one node each). A unit's
// parameters are sharded within a shard group; the shard groups hold replicas and all-reduce
// their gradient shards over the replica groups (the ranks with the same place in every shard
// group). shard = world is FSDP; shard = 1 is DDP.
#include <memory>
#include <string>

#include "collectives/process_group.hpp"

namespace st {

struct MeshShape {
  int shard = 1;
  int replicate = 1;
};

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
  int replica_index() const { return world_.rank() / shape_.shard; }
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
