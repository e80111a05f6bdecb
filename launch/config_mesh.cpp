// The mesh a config asks for at a world size: [parallel]'s dp_shard x dp_replicate x tp x pp,
// one of them -1 meaning the rest.
#include <fmt/format.h>

#include <fmt/ranges.h>

#include "core/error.hpp"
#include "launch/config.hpp"
#include "models/family.hpp"
#include "parallel/pipeline/stage_partition.hpp"

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

namespace {

void check_pipeline(const Config& c, int64_t pp) {
  const auto& p = c.parallel;
  if (p.pp_virtual_stages < 1)
    fail_input("parallel.pp_virtual_stages = {} must be >= 1", p.pp_virtual_stages);
  if (pp == 1 && (p.pp_virtual_stages != 1 || !p.pp_layers.empty()))
    fail_input(
        "parallel.pp_virtual_stages = {} and parallel.pp_layers = \"{}\" split the model into "
        "pipeline stages, but parallel.pp = 1: set parallel.pp > 1, or leave them at 1 and empty",
        p.pp_virtual_stages, fmt::join(p.pp_layers, ","));
  if (pp <= 1) return;  // 1, or -1 (the rest): checked once the world resolves it
  const int64_t stages = pp * p.pp_virtual_stages;
  if (c.model.n_layer < stages)
    fail_input(
        "parallel.pp = {} x parallel.pp_virtual_stages = {} makes {} stages, but model.n_layer = "
        "{}: every stage needs at least one block",
        pp, p.pp_virtual_stages, stages, c.model.n_layer);
  if (!p.pp_layers.empty()) stages_from_layers(p.pp_layers, int(c.model.n_layer), int(stages));
  // The schedule refuses (by key) what it cannot run: virtual stages, micro-batches.
  PipelineSchedule(p.pp_schedule,
                   {int(pp), int(p.pp_virtual_stages), int(c.training.micro_batches)});
}

}  // namespace

void check_parallelism_supported(const Config& c, int64_t tp, int64_t pp) {
  check_pipeline(c, pp);
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
