#pragma once
// Nodes that behave alike. Every rank replays the same schedule, and the groups of a mesh are
// arithmetic progressions of ranks, so the traffic a node sends and receives is the same on
// every node (the same count of flows through its link, the same share of the fabric's core).
// The engine therefore simulates only `represented` nodes and folds every other rank onto the
// represented rank in the same place of a node: a message to rank r goes to
// fold(r) = (node(r) mod represented) x ranks_per_node + (r mod ranks_per_node). Collectives
// keep their full group size (a ring of p ranks still takes p - 1 steps of n / p bytes); only
// who sends to whom is folded.
//
// Pipeline stages (the mesh's outermost dimension: stage s holds the world / pp consecutive
// ranks from s x world / pp) compute different blocks at different times, so nodes behave
// alike only within a stage: each stage's nodes are a block folded on its own, the first k
// nodes of every block represented, and a rank of another node of the block folds onto the
// represented node of its block (node mod k within the block). A rank's pipeline neighbours
// sit in the same place of the other blocks, so they are represented with it. Stage blocks
// must be whole nodes (stages sharing a node are simulated on every node).
//
// Folding is used only where it is verifiably the same traffic: for every represented rank and
// group, the folded ring neighbours and recursive-doubling partners must be mutual (my right's
// left is me), stay on another node exactly when the real ones are, and lie in the same group;
// a group inside one node, and a group whose size is not a power of two (its recursive doubling
// skips partners past its end, so its ranks do not send alike), must be represented whole. A
// recursive-doubling round whose partner lies beyond the represented ranks of its block (a
// distance of k nodes or more, always another node) exchanges with the partner at half the
// represented span instead: one message across the node link per rank, as in the real round.
// The world group spans the stages and carries only the loss's and the norm's few bytes
// (recursive doubling), so its ring is not checked under stages. The fewest nodes that pass are
// simulated; when none do, every node is.
#include <string>

#include "parallel/mesh_layout.hpp"
#include "simulate/replay.hpp"

namespace st {

// A group as the runtime builds it: member(j) = first + j x stride, this rank at `index`.
struct GroupShape {
  int id = 0;  // unique over the job (shard, replica, world, reshard, node and column groups)
  int first = 0, stride = 1, size = 1, index = 0;
  int member(int j) const { return first + j * stride; }
};

struct RankLayout {
  int nodes = 1, ranks_per_node = 1;
  int shard = 1, replicate = 1;  // shard x replicate x tp = world
  int reshard = 0;  // N > 1: reshard groups of N consecutive ranks (hpZ); else they are the shard's
  // L > 0: quantized reductions' node groups (L consecutive ranks) and column groups (the shard
  // group's ranks l, l + L, ...); else they are the shard's.
  int reduce_per_node = 0;
  int tp = 1;  // TP groups of tp consecutive ranks; shard groups' ranks are tp apart
  int pp = 1;  // pipeline stages: blocks of world / pp consecutive ranks (the outermost dimension)
  int world() const { return nodes * ranks_per_node; }
  int node_of(int rank) const { return block_of(rank, ranks_per_node); }
  GroupShape group(int rank, GroupKind kind) const;
};

class Folding {
 public:
  // `represented` nodes of `layout` simulated: k of each of its stage blocks (pp of them when
  // they are whole nodes, else one), k dividing a block's nodes.
  Folding(const RankLayout& layout, int represented);
  const RankLayout& layout() const { return layout_; }
  int nodes() const { return blocks_ * k_; }
  int ranks() const { return nodes() * layout_.ranks_per_node; }
  bool folds() const { return k_ < block_nodes_; }
  // The simulated ranks are numbered 0..ranks()-1 (the engine's hosts): real_rank(i) is the
  // job's rank the i-th stands for, simulated_index its inverse (for a represented rank).
  int real_rank(int index) const;
  int simulated_index(int rank) const;
  bool represented(int rank) const;
  int fold(int rank) const;
  // The members of `g` among the represented ranks.
  int represented_members(const GroupShape& g) const;
  int ring_right(int rank, GroupKind kind) const;
  int ring_left(int rank, GroupKind kind) const;
  // The rank a represented `rank` exchanges with in the round of `bit`; -1: none (past the
  // group's end, as in Open MPI's recursive doubling of a group that is not a power of two).
  int doubling_peer(int rank, GroupKind kind, int bit) const;
  // Empty when folding keeps the traffic (see above), else the first reason it does not.
  std::string inconsistency() const;

 private:
  int block_ranks() const { return block_nodes_ * layout_.ranks_per_node; }
  // The represented members of `g` among those in stage block `block` (a prefix of them), and
  // the index of the first of them.
  int represented_in_block(const GroupShape& g, int block, int* first_index) const;
  RankLayout layout_;
  int blocks_ = 1, block_nodes_ = 1, k_ = 1;
};

// The fewest nodes to simulate: k of each stage block, k a divisor of a block's nodes, at least
// min(block nodes, min_nodes), a multiple of nodes_per_machine (machines share cores), whose
// folding is consistent; all nodes when none is.
int represented_nodes(const RankLayout& layout, int nodes_per_machine, int min_nodes = 4);

}  // namespace st
