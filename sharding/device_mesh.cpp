#include "sharding/device_mesh.hpp"

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
