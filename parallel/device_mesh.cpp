#include "parallel/device_mesh.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace st {

DeviceMesh::DeviceMesh(ProcessGroup& world, MeshShape shape) : world_(world), shape_(shape) {
  ST_CHECK(shape.world() == world.size(), "mesh {} x {} does not cover a world of {}",
           shape.dp_replicate, shape.dp_shard, world.size());
  ST_CHECK(shape.pp == 1 && shape.tp == 1, "pp {} and tp {}: not yet", shape.pp, shape.tp);
  if (shape.dp_replicate == 1) return;  // FSDP: the world is the shard group
  const int r = world.rank();
  const int shard_group = group_index(shape, r, {MeshDim::dp_shard});
  const int replica_group = group_index(shape, r, {MeshDim::dp_replicate});
  shard_ = world.split(shard_group, r, fmt::format("shard{}", shard_group));
  replica_ = world.split(replica_group, r, fmt::format("replica{}", replica_group));
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

int DeviceMesh::data_rank() const {
  return rank_in_group(shape_, world_.rank(), {MeshDim::dp_replicate, MeshDim::dp_shard});
}

bool DeviceMesh::shard_groups_span_nodes() const {
  const auto& nodes = world_.nodes();
  for (int r = 0; r < world_.size(); ++r)
    for (int member : group_members(shape_, r, {MeshDim::dp_shard}))
      if (nodes[size_t(member)] != nodes[size_t(r)]) return true;
  return false;
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
