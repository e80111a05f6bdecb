// The mesh a config asks for at a world size: [parallel]'s dp_shard x dp_replicate x tp x pp,
// one of them -1 meaning the rest.
#include <fmt/format.h>

#include "core/error.hpp"
#include "launch/config.hpp"
#include "models/family.hpp"

namespace st {

MeshShape mesh_shape(const Config& c, int world_size) {
  struct Degree {
    const char* key;
    int64_t value;
  };
  Degree degrees[] = {{"parallel.dp_shard", c.parallel.dp_shard},
                      {"parallel.dp_replicate", c.parallel.dp_replicate},
                      {"parallel.tp", c.parallel.tp},
                      {"parallel.pp", c.parallel.pp}};
  Degree* rest = nullptr;
  int64_t given = 1;
  for (Degree& d : degrees) {
    if (d.value == -1) {
      if (rest)
        fail_input("{} and {} are both -1 (the rest); give all but one of them", rest->key, d.key);
      rest = &d;
    } else if (d.value < 1 || d.value > (1 << 24)) {
      fail_input("{} = {} must be 1 to 16777216, or -1 for the rest", d.key, d.value);
    } else {
      given *= d.value;
    }
  }
  const std::string product =
      fmt::format("parallel.dp_shard = {} x dp_replicate = {} x tp = {} x pp = {}",
                  c.parallel.dp_shard, c.parallel.dp_replicate, c.parallel.tp, c.parallel.pp);
  if (rest) {
    if (given > world_size || world_size % given != 0)
      fail_input("{} = -1 (the rest): {} ranks are not a multiple of the others' product {} ({})",
                 rest->key, world_size, given, product);
    rest->value = world_size / given;
  } else if (given != world_size) {
    fail_input(
        "{} = {} is not the world size {}; their product must be the number of ranks (-1 for "
        "one of them means the rest, as in parallel.dp_shard = -1)",
        product, given, world_size);
  }
  const MeshShape shape{.dp_shard = int(degrees[0].value),
                        .dp_replicate = int(degrees[1].value),
                        .tp = int(degrees[2].value),
                        .pp = int(degrees[3].value)};
  check_parallelism_supported(c, shape.tp, shape.pp);
  return shape;
}

int64_t rows_per_data_rank(const Config& c, const MeshShape& mesh) {
  return c.training.global_batch / c.training.micro_batches / mesh.data_parallel();
}

void check_parallelism_supported(const Config& c, int64_t tp, int64_t pp) {
  if (pp > 1)
    fail_input(
        "parallel.pp = {}: pipeline parallelism is not implemented yet (it comes with its own "
        "issue); set parallel.pp = 1",
        pp);
  if (tp <= 1) return;  // 1, or -1 (the rest): checked once the world resolves it
  const ModelFamily& family = model_family(c.model.family);
  if (!family.check_tensor_parallel)
    fail_input(
        "parallel.tp = {}: model.family = {} has no tensor-parallel plan yet; set parallel.tp = 1",
        tp, family.name);
  family.check_tensor_parallel(c.model, tp);
  if (c.parallel.sequence_parallel && c.training.seq_len % tp != 0)
    fail_input(
        "parallel.sequence_parallel = true splits each sequence's tokens over parallel.tp = {}, "
        "but training.seq_len = {} is not divisible by {}: use a multiple of {}, or set "
        "parallel.sequence_parallel = false",
        tp, c.training.seq_len, tp, tp);
}

}  // namespace st
