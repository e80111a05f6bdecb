// Shards DeepRegressor over the MPI world with shardtrain's FSDP runtime, trains it on
// synthetic data, checkpoints and resumes:
//   mpirun -np 2 ./custom_model --steps 40 --ckpt /tmp/regressor [--stop-after 20]
// Run it again with the same --ckpt and it continues from the newest checkpoint.
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "api/rank_context.hpp"
#include "api/sharded_model.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "deep_regressor.hpp"

namespace {

constexpr int64_t kGlobalBatch = 64;  // samples per step, all ranks together

// Rows [first, first + rows) of the global batch of `step`: features ~ N(0, 1), each a function
// of (step, sample index) only, so any world size sees the same global batch.
st::Batch synthetic_rows(int64_t step, int64_t first, int64_t rows, int64_t D) {
  st::Batch b{st::Tensor::empty("x", {rows, D}, st::DType::f32),
              st::Tensor::empty("t", {rows, 1}, st::DType::f32)};
  float* x = b.inputs.data<float>();
  st::fill_normal(x, size_t(rows * D), 7, uint64_t(step), uint64_t(first * D), 0.f, 1.f);
  for (int64_t i = 0; i < rows; ++i) {
    const float* r = x + i * D;
    b.targets.data<float>()[i] = std::sin(r[0]) + 0.5f * r[1] * r[2] - 0.25f * r[3];
  }
  return b;
}

struct Args {
  int64_t steps = 40, stop_after = -1, save_every = 10;
  std::string ckpt;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const std::string value = argv[i + 1];
    if (key == "--ckpt")
      a.ckpt = value;
    else if (key == "--steps")
      a.steps = std::stoll(value);
    else if (key == "--stop-after")
      a.stop_after = std::stoll(value);
    else if (key == "--save-every")
      a.save_every = std::stoll(value);
    else
      st::fail_input("unknown option '{}' (--steps, --stop-after, --save-every, --ckpt)", key);
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  // The MPI world under mpirun, else one rank; MPI ends with `ranks`, at the end of main.
  st::RankContext ranks = st::start_ranks();
  st::use_threads_per_rank(0, ranks.ranks_on_node);  // the node's cores shared by its ranks
  // A failure on one rank ends every rank at once, with that rank's message.
  return st::run_after_startup([&] {
    const Args args = parse(argc, argv);
    const RegressorShape shape;
    DeepRegressor model(shape, st::DType::bf16);  // built on meta: no parameter memory yet

    st::ShardPolicy policy;  // BF16 all-gathers, FP32 reduce-scatters and masters, ZeRO-3
    policy.seed = 1;
    policy.optimizer.weight_decay = 0.01f;
    auto sharded = st::fully_shard(model, *ranks.group, policy);  // only local shards exist

    const int64_t start = args.ckpt.empty() ? 0 : sharded->resume(args.ckpt);
    const int64_t rows = kGlobalBatch / ranks.size(), first = ranks.rank() * rows;
    if (kGlobalBatch % ranks.size() != 0)
      st::fail_input("{} ranks do not divide the global batch of {}", ranks.size(), kGlobalBatch);
    if (ranks.rank() == 0 && start > 0) fmt::print("resumed after step {}\n", start);
    for (int64_t step = start; step < args.steps; ++step) {
      const float lr = 3e-3f * (step < 5 ? float(step + 1) / 5 : 1.0f);
      const st::StepResult r =
          sharded->step({synthetic_rows(step, first, rows, shape.inputs)}, kGlobalBatch, lr);
      if (ranks.rank() == 0)
        fmt::print("step {} | loss {:.9g} | norm {:.4f}\n", step + 1, r.loss, r.grad_norm);
      const bool stop = step + 1 == args.stop_after;
      if (!args.ckpt.empty() && ((step + 1) % args.save_every == 0 || stop))
        sharded->save(args.ckpt, step + 1);
      if (stop) return 0;
    }
    // Held-out samples (step index beyond training): the loss the model reached.
    const double held_out =
        sharded->evaluate(synthetic_rows(1 << 20, first, rows, shape.inputs), kGlobalBatch);
    if (ranks.rank() == 0) fmt::print("held-out loss {:.9g}\n", held_out);
    return 0;
  });
}
