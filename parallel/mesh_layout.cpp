#include "parallel/mesh_layout.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"

namespace st {

const char* mesh_dim_name(MeshDim dim) {
  switch (dim) {
    case MeshDim::pp:
      return "pp";
    case MeshDim::dp_replicate:
      return "dp_replicate";
    case MeshDim::dp_shard:
      return "dp_shard";
    case MeshDim::tp:
      return "tp";
  }
  return "?";
}

namespace {
// A dimension's field of a MeshShape or a MeshCoord (the same names in both).
template <class Fields>
auto& field(Fields& f, MeshDim dim) {
  switch (dim) {
    case MeshDim::pp:
      return f.pp;
    case MeshDim::dp_replicate:
      return f.dp_replicate;
    case MeshDim::dp_shard:
      return f.dp_shard;
    case MeshDim::tp:
      break;
  }
  return f.tp;
}
}  // namespace

int MeshShape::size(MeshDim dim) const {
  return field(*this, dim);
}

int& MeshCoord::at(MeshDim dim) {
  return field(*this, dim);
}

int MeshCoord::at(MeshDim dim) const {
  return field(*this, dim);
}

namespace {

void check_shape(const MeshShape& shape) {
  for (MeshDim d : kMeshDimOrder)
    ST_CHECK(shape.size(d) >= 1, "mesh dimension {} has size {}", mesh_dim_name(d), shape.size(d));
  ST_CHECK(shape.world() <= (int64_t(1) << 30), "a mesh of {} ranks", shape.world());
}

bool has_dim(const MeshDims& dims, MeshDim d) {
  return std::find(dims.begin(), dims.end(), d) != dims.end();
}

// How many ranks apart two neighbours along `dim` are: the product of the inner sizes.
int stride_of(const MeshShape& shape, MeshDim dim) {
  int stride = 1;
  for (int i = kMeshDims - 1; i >= 0 && kMeshDimOrder[i] != dim; --i)
    stride *= shape.size(kMeshDimOrder[i]);
  return stride;
}

}  // namespace

MeshCoord coord_of(const MeshShape& shape, int rank) {
  check_shape(shape);
  ST_CHECK(rank >= 0 && rank < shape.world(), "rank {} is outside a mesh of {} ranks", rank,
           shape.world());
  MeshCoord c;
  int rest = rank;
  for (int i = kMeshDims - 1; i >= 0; --i) {
    const MeshDim d = kMeshDimOrder[i];
    c.at(d) = rest % shape.size(d);
    rest /= shape.size(d);
  }
  return c;
}

int rank_of(const MeshShape& shape, const MeshCoord& coord) {
  check_shape(shape);
  int rank = 0;
  for (MeshDim d : kMeshDimOrder) {
    ST_CHECK(coord.at(d) >= 0 && coord.at(d) < shape.size(d), "{} coordinate {} of a size {}",
             mesh_dim_name(d), coord.at(d), shape.size(d));
    rank = rank * shape.size(d) + coord.at(d);
  }
  return rank;
}

std::vector<int> group_members(const MeshShape& shape, int rank, const MeshDims& dims) {
  const MeshCoord mine = coord_of(shape, rank);
  std::vector<int> members;
  // Every coordinate along `dims`, the others fixed at this rank's.
  const int n = group_size(shape, dims);
  for (int k = 0; k < n; ++k) {
    MeshCoord c = mine;
    int rest = k;
    for (int i = kMeshDims - 1; i >= 0; --i) {
      const MeshDim d = kMeshDimOrder[i];
      if (!has_dim(dims, d)) continue;
      c.at(d) = rest % shape.size(d);
      rest /= shape.size(d);
    }
    members.push_back(rank_of(shape, c));
  }
  return members;  // ascending: the coordinates were enumerated outermost first
}

int group_size(const MeshShape& shape, const MeshDims& dims) {
  int n = 1;
  for (MeshDim d : kMeshDimOrder)
    if (has_dim(dims, d)) n *= shape.size(d);
  return n;
}

int group_index(const MeshShape& shape, int rank, const MeshDims& dims) {
  // The coordinates along the other dimensions, as one number (outermost first).
  const MeshCoord c = coord_of(shape, rank);
  int index = 0;
  for (MeshDim d : kMeshDimOrder)
    if (!has_dim(dims, d)) index = index * shape.size(d) + c.at(d);
  return index;
}

int rank_in_group(const MeshShape& shape, int rank, const MeshDims& dims) {
  const MeshCoord c = coord_of(shape, rank);
  int index = 0;
  for (MeshDim d : kMeshDimOrder)
    if (has_dim(dims, d)) index = index * shape.size(d) + c.at(d);
  return index;
}

RankProgression progression(const MeshShape& shape, int rank, const MeshDims& adjacent_dims) {
  ST_CHECK(!adjacent_dims.empty(), "a progression along no dimension");
  // The innermost spanned dimension sets the stride; the spanned ones must be adjacent. O(1):
  // the simulator asks this of every rank of meshes of millions.
  int inner = -1, outer = kMeshDims;
  for (int i = 0; i < kMeshDims; ++i)
    if (has_dim(adjacent_dims, kMeshDimOrder[i]))
      inner = std::max(inner, i), outer = std::min(outer, i);
  ST_CHECK(inner - outer + 1 == int(adjacent_dims.size()),
           "mesh dimensions that are not adjacent are no progression");
  MeshCoord first = coord_of(shape, rank);
  for (MeshDim d : adjacent_dims) first.at(d) = 0;
  return {rank_of(shape, first), stride_of(shape, kMeshDimOrder[inner]),
          group_size(shape, adjacent_dims), rank_in_group(shape, rank, adjacent_dims)};
}

int block_of(int r, int block) {
  ST_CHECK(block >= 1 && r >= 0, "group rank {} in blocks of {}", r, block);
  return r / block;
}

std::vector<int> pretend_node_map(int world, int per_node) {
  ST_CHECK(per_node >= 1 && world % per_node == 0, "{} ranks in nodes of {}", world, per_node);
  std::vector<int> nodes(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) nodes[size_t(r)] = block_of(r, per_node);
  return nodes;
}

int index_in_block(int r, int block) {
  ST_CHECK(block >= 1 && r >= 0, "group rank {} in blocks of {}", r, block);
  return r % block;
}

std::string describe_mesh(const MeshShape& shape) {
  if (shape.pp > 1) {
    if (shape.world() == shape.pp) return fmt::format("PP over {} ranks", shape.pp);
    MeshShape stage = shape;
    stage.pp = 1;
    return fmt::format("PP {} x {}", shape.pp, describe_mesh(stage));
  }
  if (shape.tp > 1) {
    if (shape.data_parallel() == 1) return fmt::format("TP over {} ranks", shape.tp);
    MeshShape data = shape;
    data.tp = 1;
    return fmt::format("{} x TP {}", describe_mesh(data), shape.tp);
  }
  if (shape.dp_replicate == 1) return fmt::format("FSDP over {} ranks", shape.dp_shard);
  if (shape.dp_shard == 1)
    return fmt::format("DDP over {} replicas (dp_shard 1)", shape.dp_replicate);
  return fmt::format("HSDP: {} replicas x {} shards", shape.dp_replicate, shape.dp_shard);
}

}  // namespace st
