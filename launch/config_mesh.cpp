// The mesh a config asks for at a world size: sharding.shard_degree x replicate_degree, -1
// meaning the rest.
#include "core/error.hpp"
#include "launch/config.hpp"

namespace st {

MeshShape mesh_shape(const Config& c, int world_size) {
  int64_t shard = c.sharding.shard_degree, replicate = c.sharding.replicate_degree;
  auto check = [](int64_t v, const char* key) {
    if (v != -1 && v < 1) fail_input("sharding.{} = {} must be >= 1, or -1 for the rest", key, v);
  };
  check(shard, "shard_degree");
  check(replicate, "replicate_degree");
  if (shard == -1 && replicate == -1)
    fail_input(
        "sharding.shard_degree and sharding.replicate_degree are both -1 (the rest); give one "
        "of them");
  const char* rest_key = shard == -1 ? "sharding.shard_degree" : "sharding.replicate_degree";
  const int64_t given = shard == -1 ? replicate : shard;
  if ((shard == -1 || replicate == -1) && world_size % given != 0)
    fail_input("{} = -1 (the rest): {} ranks are not a multiple of {} = {}", rest_key, world_size,
               shard == -1 ? "sharding.replicate_degree" : "sharding.shard_degree", given);
  if (shard == -1) shard = world_size / replicate;
  if (replicate == -1) replicate = world_size / shard;
  if (shard * replicate != world_size)
    fail_input(
        "sharding.shard_degree = {} x sharding.replicate_degree = {} = {} is not the world size "
        "{}; their product must be the number of ranks (-1 for one of them means the rest, as "
        "in sharding.replicate_degree = -1)",
        shard, replicate, shard * replicate, world_size);
  return {.dp_shard = int(shard), .dp_replicate = int(replicate)};
}

}  // namespace st
