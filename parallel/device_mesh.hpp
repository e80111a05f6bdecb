#pragma once
// The device mesh's process groups (the arithmetic is parallel/mesh_layout's): for now its
// data-parallel dimensions, hybrid sharding (FSDP2/torchtitan's HSDP): the world's ranks form
// `dp_replicate` shard groups of `dp_shard` consecutive ranks each (ideally one node each). A
// unit's parameters are sharded within a shard group; the shard groups hold replicas and all-reduce
// their gradient shards over the replica groups (the ranks with the same place in every shard
// group). dp_shard = world is FSDP; dp_shard = 1 is DDP. The mesh creates every group the
// runtime uses, hpZ's and the quantized collectives' within a shard group too, and owns them:
// nothing else splits a group by rank arithmetic.
#include <map>
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
  // hpZ's group: this rank's block of `n` consecutive ranks of its shard group (n divides it).
  // Made by the first call for n, a collective over the shard group, and kept.
  ProcessGroup& shard_block_group(int n);
  // The quantized reductions' groups, for a shard group whose ranks sit on their nodes in
  // blocks of `per_node` consecutive ranks: this rank's node block (nullptr for one rank per
  // node) and the ranks with its place in every block. Made by the first call, a collective
  // over the shard group, and kept.
  struct NodeGroups {
    ProcessGroup* node = nullptr;
    ProcessGroup* across_nodes = nullptr;
  };
  NodeGroups shard_node_groups(int per_node);
  // Which shard group (replica) this rank belongs to.
  int replica_index() const;
  // The ranks that write checkpoints: one copy of every shard, replica 0's.
  bool writes_checkpoint() const { return replica_index() == 0; }
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
  std::map<int, std::unique_ptr<ProcessGroup>> shard_blocks_;  // by block size
  int node_block_ = 0;
  std::unique_ptr<ProcessGroup> node_, across_nodes_;
};

}  // namespace st
