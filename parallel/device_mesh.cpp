#include "parallel/device_mesh.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace st {

DeviceMesh::DeviceMesh(ProcessGroup& world, MeshShape shape) : world_(world), shape_(shape) {
  ST_CHECK(shape.world() == world.size(), "mesh {} x {} x {} does not cover a world of {}",
           shape.dp_replicate, shape.dp_shard, shape.tp, world.size());
  // FSDP alone: the world is the shard group.
  if (shape.pp == 1 && shape.dp_replicate == 1 && shape.tp == 1) return;
  const int r = world.rank();
  // Every rank makes the same splits in the same order (each is collective over the world).
  const auto split = [&](const MeshDims& dims, const char* name) {
    const int index = group_index(shape, r, dims);
    return world.split(index, r, fmt::format("{}{}", name, index));
  };
  shard_ = split({MeshDim::dp_shard}, "shard");
  if (shape.dp_replicate > 1) replica_ = split({MeshDim::dp_replicate}, "replica");
  if (shape.tp > 1) {
    tp_ = split({MeshDim::tp}, "tp");
    model_ = split({MeshDim::dp_shard, MeshDim::tp}, "model");
  }
  if (shape.pp > 1) {
    pipeline_ = split({MeshDim::pp}, "pipeline");
    whole_model_ = split({MeshDim::pp, MeshDim::dp_shard, MeshDim::tp}, "whole-model");
  }
}

int DeviceMesh::pp_rank() const {
  return coord_of(shape_, world_.rank()).pp;
}

ProcessGroup& DeviceMesh::shard_block_group(int n) {
  ProcessGroup& shard = shard_group();
  ST_CHECK(n >= 1 && shard.size() % n == 0, "blocks of {} do not divide a shard group of {}", n,
           shard.size());
  auto& group = shard_blocks_[n];
  if (!group) {
    const int block = block_of(shard.rank(), n);
    group = shard.split(block, shard.rank(), fmt::format("reshard{}", block));
  }
  return *group;
}

DeviceMesh::NodeGroups DeviceMesh::shard_node_groups(int per_node) {
  ProcessGroup& shard = shard_group();
  ST_CHECK(per_node >= 1 && shard.size() % per_node == 0,
           "node blocks of {} do not divide a shard group of {}", per_node, shard.size());
  ST_CHECK(node_block_ == 0 || node_block_ == per_node, "node blocks of {}, then of {}",
           node_block_, per_node);
  if (node_block_ == 0) {
    node_block_ = per_node;
    const int r = shard.rank(), node = block_of(r, per_node), column = index_in_block(r, per_node);
    if (per_node > 1) node_ = shard.split(node, r, fmt::format("node{}", node));
    across_nodes_ = shard.split(column, r, fmt::format("across-nodes{}", column));
  }
  return {node_.get(), across_nodes_.get()};
}

int DeviceMesh::replica_index() const {
  return coord_of(shape_, world_.rank()).dp_replicate;
}

int DeviceMesh::tp_rank() const {
  return coord_of(shape_, world_.rank()).tp;
}

int DeviceMesh::data_rank() const {
  return rank_in_group(shape_, world_.rank(), {MeshDim::dp_replicate, MeshDim::dp_shard});
}

namespace {

bool groups_span_nodes(const ProcessGroup& world, const MeshShape& shape, MeshDim dim) {
  const auto& nodes = world.nodes();
  for (int r = 0; r < world.size(); ++r)
    for (int member : group_members(shape, r, {dim}))
      if (nodes[size_t(member)] != nodes[size_t(r)]) return true;
  return false;
}

}  // namespace

bool DeviceMesh::shard_groups_span_nodes() const {
  return groups_span_nodes(world_, shape_, MeshDim::dp_shard);
}

bool DeviceMesh::tp_groups_span_nodes() const {
  return groups_span_nodes(world_, shape_, MeshDim::tp);
}

std::string DeviceMesh::node_map() const {
  const auto& nodes = world_.nodes();
  std::string out;
  for (int r = 0; r < world_.size();) {
    int end = r;
    while (end + 1 < world_.size() && nodes[size_t(end + 1)] == nodes[size_t(r)]) ++end;
    out +=
        fmt::format("{}node {}: rank{} {}", out.empty() ? "" : ", ", nodes[size_t(r)],
                    end > r ? "s" : "", end > r ? fmt::format("{}-{}", r, end) : std::to_string(r));
    r = end + 1;
  }
  return out;
}

std::string DeviceMesh::describe() const {
  return describe_mesh(shape_);
}

}  // namespace st
