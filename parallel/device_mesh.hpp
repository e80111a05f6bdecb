#pragma once
// The device mesh's process groups (the arithmetic is parallel/mesh_layout's): hybrid sharding
// (FSDP2/torchtitan's HSDP) and tensor parallelism. The `tp` ranks of a TP group are consecutive
// (ideally one node) and hold slices of the same parameters; with tp = 1, the world's ranks form
// `dp_replicate` shard groups of `dp_shard` consecutive ranks each (ideally one node each), and
// with tp > 1 a shard group is the ranks of one TP coordinate in such a block. A unit's
// parameters (a TP rank's slices of them) are sharded within a shard group; the shard groups
// hold replicas and all-reduce their gradient shards over the replica groups (the ranks with the
// same place in every shard group). dp_shard = world is FSDP; dp_shard = 1 is DDP. The mesh
// creates every group the runtime uses, hpZ's and the quantized collectives' within a shard
// group too, and owns them: nothing else splits a group by rank arithmetic.
#include <map>
#include <memory>
#include <string>

#include "collectives/process_group.hpp"
#include "parallel/mesh_layout.hpp"

namespace st {

class DeviceMesh {
 public:
  // Collective over `world` (whose size must be the shape's product). With pp = replicate =
  // tp = 1 the shard group is the world itself; otherwise the groups are split from it.
  DeviceMesh(ProcessGroup& world, MeshShape shape);

  const MeshShape& shape() const { return shape_; }
  ProcessGroup& world() { return world_; }
  ProcessGroup& shard_group() { return shard_ ? *shard_ : world_; }
  // nullptr when there is one replica (nothing to all-reduce).
  ProcessGroup* replica_group() { return replica_.get(); }
  // This rank's TP group (its tp ranks, consecutive), nullptr for tp = 1.
  ProcessGroup* tp_group() { return tp_.get(); }
  // This rank's place in its TP group (0 for tp = 1).
  int tp_rank() const;
  // The ranks that hold one copy of a pipeline stage's part of the model between them
  // (dp_shard x tp; the whole model's without pipeline parallelism): where checkpoints are
  // written and read. The shard group for tp = 1.
  ProcessGroup& model_group() { return model_ ? *model_ : shard_group(); }
  // The ranks that hold one copy of the whole model (pp x dp_shard x tp): where a sum over every
  // parameter once (the gradient norm) is taken. model_group() for pp = 1.
  ProcessGroup& whole_model_group() { return whole_model_ ? *whole_model_ : model_group(); }
  // This rank's pipeline group (its pp ranks, one per stage, the same place in each), nullptr for
  // pp = 1; and its place in it (its pipeline rank).
  ProcessGroup* pipeline_group() { return pipeline_.get(); }
  int pp_rank() const;
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
  // True when some shard group (TP group) has ranks on more than one node.
  bool shard_groups_span_nodes() const;
  bool tp_groups_span_nodes() const;
  // "HSDP: 2 replicas x 2 shards" and the like, for summaries.
  std::string describe() const;
  // "node 0: ranks 0-1, node 1: ranks 2-3": the world's node map.
  std::string node_map() const;

 private:
  ProcessGroup& world_;
  MeshShape shape_;
  std::unique_ptr<ProcessGroup> shard_, replica_, tp_, model_, pipeline_, whole_model_;
  std::map<int, std::unique_ptr<ProcessGroup>> shard_blocks_;  // by block size
  int node_block_ = 0;
  std::unique_ptr<ProcessGroup> node_, across_nodes_;
};

}  // namespace st
