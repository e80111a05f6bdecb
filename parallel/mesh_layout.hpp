#pragma once
// The device mesh as arithmetic: named dimensions, outermost to innermost pp, dp_replicate,
// dp_shard, tp (torchtitan's order: a TP group is consecutive ranks, ideally on one node, and
// a pipeline stage is a contiguous block of ranks), each of any size whose product is the world.
// Every rank <-> coordinate computation of shardtrain is here: the runtime's groups
// (parallel/device_mesh), the data rank, the checkpoint writer, the simulator's symmetry.
#include <cstdint>
#include <string>
#include <vector>

namespace st {

enum class MeshDim { pp, dp_replicate, dp_shard, tp };
constexpr int kMeshDims = 4;
// Outermost first.
constexpr MeshDim kMeshDimOrder[kMeshDims] = {MeshDim::pp, MeshDim::dp_replicate, MeshDim::dp_shard,
                                              MeshDim::tp};
const char* mesh_dim_name(MeshDim dim);

// Fields in the order the 2-D mesh had them ({shard, replicate} still reads right), not the
// layout's order (kMeshDimOrder).
struct MeshShape {
  int dp_shard = 1;
  int dp_replicate = 1;
  int tp = 1;
  int pp = 1;
  int size(MeshDim dim) const;
  int64_t world() const { return int64_t(pp) * dp_replicate * dp_shard * tp; }
  // The data-parallel degree: the ranks that read different rows (dp_replicate x dp_shard).
  int data_parallel() const { return dp_replicate * dp_shard; }
  bool operator==(const MeshShape&) const = default;
};

struct MeshCoord {  // fields in MeshShape's order
  int dp_shard = 0;
  int dp_replicate = 0;
  int tp = 0;
  int pp = 0;
  int at(MeshDim dim) const;
  int& at(MeshDim dim);
  bool operator==(const MeshCoord&) const = default;
};

// A set of dimensions (a group spans them; the others are fixed).
using MeshDims = std::vector<MeshDim>;

// rank = ((pp * dp_replicate + r) * dp_shard + s) * tp + t. Both check their argument.
MeshCoord coord_of(const MeshShape& shape, int rank);
int rank_of(const MeshShape& shape, const MeshCoord& coord);

// The group of `rank` spanning `dims`: its members in ascending rank order (which is the
// order of their coordinates along `dims`, outermost first), its index among all such groups
// (the same for every member), and `rank`'s index in it.
std::vector<int> group_members(const MeshShape& shape, int rank, const MeshDims& dims);
int group_index(const MeshShape& shape, int rank, const MeshDims& dims);
int rank_in_group(const MeshShape& shape, int rank, const MeshDims& dims);
// How many ranks a group spanning `dims` has.
int group_size(const MeshShape& shape, const MeshDims& dims);
// A group spanning adjacent dimensions (one, or dp_replicate with dp_shard) is the ranks
// first, first + stride, ... (size of them); `index` is `rank`'s place among them.
struct RankProgression {
  int first = 0, stride = 1, size = 1, index = 0;
};
RankProgression progression(const MeshShape& shape, int rank, const MeshDims& adjacent_dims);

// Within a group of `size` ranks, the block of `block` consecutive group ranks that group rank
// `r` falls in (hpZ's reshard groups, the quantized collectives' node groups), and its index in
// that block; the "column" of r: the ranks at the same index in every block.
int block_of(int r, int block);
int index_in_block(int r, int block);
// The node of each of `world` ranks when every `per_node` consecutive ranks pretend to be one
// node (sharding.ranks_per_node; `per_node` divides `world`).
std::vector<int> pretend_node_map(int world, int per_node);

// "FSDP over 4 ranks", "HSDP: 2 replicas x 2 shards", "DDP over 4 replicas (dp_shard 1)",
// "FSDP over 2 ranks x TP 2", "TP over 2 ranks", "PP 2 x FSDP over 2 ranks", "PP over 4 ranks":
// for summaries.
std::string describe_mesh(const MeshShape& shape);

}  // namespace st
