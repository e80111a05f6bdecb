#include "sharding/device_mesh.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace st {

DeviceMesh::DeviceMesh(ProcessGroup& world, MeshShape shape) : world_(world), shape_(shape) {
  ST_CHECK(shape.shard >= 1 && shape.replicate >= 1 &&
               int64_t(shape.shard) * shape.replicate == world.size(),
           "mesh {} x {} does not cover a world of {}", shape.replicate, shape.shard, world.size());
  if (shape.replicate == 1) return;  // FSDP: the world is the shard group
  const int r = world.rank();
  shard_ = world.split(r / shape.shard, r, fmt::format("shard{}", r / shape.shard));
  replica_ = world.split(r % shape.shard, r, fmt::format("replica{}", r % shape.shard));
}

bool DeviceMesh::shard_groups_span_nodes() const {
  const auto& nodes = world_.nodes();
  for (int r = 0; r < world_.size(); ++r)
    if (nodes[size_t(r)] != nodes[size_t(r - r % shape_.shard)]) return true;
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
  if (shape_.replicate == 1) return fmt::format("FSDP over {} ranks", shape_.shard);
  if (shape_.shard == 1)
    return fmt::format("DDP over {} replicas (shard_degree 1)", shape_.replicate);
  return fmt::format("HSDP: {} replicas x {} shards", shape_.replicate, shape_.shard);
}

}  // namespace st
