// The FSDP runtime under mpirun (1 to 4 ranks) against the unsharded single-process trainer
// (LocalTrainer), which every rank also runs on its own as the reference.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "api/sharded_model.hpp"
#include "collectives/fake_process_group.hpp"
#include "collectives/mpi_process_group.hpp"
#include "core/memory_stats.hpp"
#include "launch/model_factory.hpp"
#include "launch/sharded_trainer.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/local_trainer.hpp"
#include "tests/support/mlp.hpp"
#include "tests/support/shared_dir.hpp"

namespace st {
namespace {

using testing::data;
using testing::max_weight_diff;
using testing::test_config;
using testing::world;

// What the tolerances below are measured against, printed by rank 0.
void report(const char* what, double worst_loss_rel, double worst_weight) {
  if (world().rank() == 0)
    std::printf(
        "  %s at %d ranks: worst relative loss difference %.3g, worst weight difference %.3g\n",
        what, world().size(), worst_loss_rel, worst_weight);
}

bool weights_bitwise_equal(ShardedTrainer& a, ShardedTrainer& b) {
  bool equal = true;
  for (size_t i = 0; i < a.model().param_specs().size(); ++i) {
    const Tensor x = a.fsdp().gather_master(i), y = b.fsdp().gather_master(i);
    equal = equal && std::memcmp(x.raw(), y.raw(), x.nbytes()) == 0;
  }
  return equal;
}

TEST(Sharding, InitialWeightsAreBitwiseTheUnshardedOnes) {
  for (const char* dtype : {"fp32", "bf16"}) {
    const Config config = test_config({std::string("precision.param_dtype=") + dtype});
    ShardedTrainer sharded(config, data(), world(), make_model(config));
    LocalTrainer local(config, data());
    const auto& specs = local.model().param_specs();
    for (size_t i = 0; i < specs.size(); ++i) {
      const Tensor got = sharded.fsdp().gather_master(i);
      const Tensor want = local.params().master(i);
      ASSERT_EQ(got.nbytes(), want.nbytes());
      EXPECT_EQ(std::memcmp(got.raw(), want.raw(), got.nbytes()), 0)
          << specs[i].name << " differs at world size " << world().size();
    }
  }
}

struct Tolerance {
  double loss_rel, norm_rel, weight_abs;
};

// Trains `steps` steps sharded over the world and unsharded on this rank, side by side, and
// compares losses, gradient norms, final weights and the validation loss. At one rank the
// arithmetic is the same as the reference's: bitwise (the norm aside, whose per-parameter
// squares are summed in unit order here and declaration order there).
void expect_training_matches(const char* dtype, Tolerance tol) {
  const Config config = test_config({std::string("precision.param_dtype=") + dtype});
  ShardedTrainer sharded(config, data(), world(), make_model(config));
  LocalTrainer local(config, data());
  const bool one = world().size() == 1;
  double worst_loss = 0;
  for (int64_t s = 0; s < config.training.max_steps; ++s) {
    const StepStats a = sharded.step(s), b = local.step(s);
    worst_loss = std::max(worst_loss, std::fabs(a.loss - b.loss) / b.loss);
    if (one) {
      EXPECT_EQ(a.loss, b.loss) << "step " << s;
      EXPECT_DOUBLE_EQ(a.grad_norm, b.grad_norm) << "step " << s;
    } else {
      EXPECT_NEAR(a.loss, b.loss, tol.loss_rel * b.loss) << "step " << s;
      EXPECT_NEAR(a.grad_norm, b.grad_norm, tol.norm_rel * b.grad_norm) << "step " << s;
    }
  }
  const double diff = max_weight_diff(sharded, local);
  report(dtype, worst_loss, diff);
  if (one)
    EXPECT_EQ(diff, 0.0);
  else
    EXPECT_LT(diff, tol.weight_abs);
  const double val_sharded = sharded.evaluate(40), val_local = local.evaluate(40);
  EXPECT_NEAR(val_sharded, val_local, tol.loss_rel * val_local);
}

// FP32 everywhere: the only difference from the reference is the order in which gradient
// contributions are summed (per rank, then across ranks). One reordering perturbs a gradient
// by ~1e-7 relative; Adam's normalized steps carry that into the weights, and over 20 steps at
// lr 3e-3 the drift measured at 2-4 ranks stays below 1e-7 relative in the loss and 1e-5 in
// any weight. The bounds (1e-5, 1e-4) leave 10x room and more.
TEST(Sharding, Fp32TrainingMatchesTheUnshardedTrainer) {
  expect_training_matches("fp32", {.loss_rel = 1e-5, .norm_rel = 1e-4, .weight_abs = 1e-4});
}

// BF16 compute: weights are rounded to BF16 (8 bits of mantissa) before every use, so an FP32
// reordering that moves a master weight across a BF16 rounding boundary changes that weight
// by up to 2^-8 relative in the forward. Such flips are rare and their effect on the mean
// loss over 384 tokens is small; measured here the losses agree to ~1.4e-4 relative over 20
// steps at 2-4 ranks. The bound is 2e-3 relative: far below the step-to-step change of the
// loss (~1e-2) that a real bug (a missing gradient, a wrong shard) would show; the gradient
// norm, a sum over every element, gets 2e-2. Weights: Adam moves an element by about lr (3e-3)
// per step whatever its gradient's size, so a weight whose tiny gradient changed sign drifts by
// a few lr; measured up to 7e-3, bounded at 3e-2 (ten steps' worth, where a wrong update would
// reach 20 steps x 2 lr = 0.12).
TEST(Sharding, Bf16TrainingMatchesTheUnshardedTrainer) {
  expect_training_matches("bf16", {.loss_rel = 2e-3, .norm_rel = 2e-2, .weight_abs = 3e-2});
}

// Resharding and prefetching change when parameters are gathered, never what is computed.
TEST(Sharding, ReshardAndPrefetchDoNotChangeTheNumbers) {
  const Config base_config = test_config({"training.max_steps=4"});
  ShardedTrainer base(base_config, data(), world(), make_model(base_config));
  std::vector<double> base_losses;
  for (int64_t s = 0; s < 4; ++s) base_losses.push_back(base.step(s).loss);
  for (const char* reshard : {"true", "false"})
    for (const char* depth : {"0", "1", "2"}) {
      const Config config = test_config({"training.max_steps=4",
                                         std::string("sharding.reshard_after_forward=") + reshard,
                                         std::string("sharding.prefetch=") + depth});
      ShardedTrainer variant(config, data(), world(), make_model(config));
      for (int64_t s = 0; s < 4; ++s)
        EXPECT_EQ(variant.step(s).loss, base_losses[size_t(s)])
            << "reshard " << reshard << " prefetch " << depth << " step " << s;
      EXPECT_TRUE(weights_bitwise_equal(variant, base))
          << "reshard " << reshard << " prefetch " << depth;
    }
}

// On one node every all-gather and reduce-scatter of FSDP's reads its peers' buffers in place:
// the symmetric memory holds every buffer the schedule keeps at once, all units' parameters
// without resharding after forward and all units' gradients when reduced once a step included.
TEST(Sharding, EveryCollectiveOnANodeReadsSymmetricMemory) {
  if (world().size() == 1) return;  // no peer to read
  for (const std::vector<std::string>& keys :
       {std::vector<std::string>{},
        {"sharding.reshard_after_forward=false"},
        {"sharding.accumulation=reduce_last", "training.micro_batches=3",
         "training.global_batch=36"}}) {
    // Six blocks: more units of one size than the few buffers a resharding schedule holds.
    std::vector<std::string> with = keys;
    with.push_back("model.n_layer=6");
    const Config config = test_config(with);
    ShardedTrainer trainer(config, data(), world(), make_model(config));
    auto* group = dynamic_cast<MpiProcessGroup*>(&trainer.mesh().shard_group());
    if (!group || !group->single_node()) return;  // across nodes: nothing shared
    const uint64_t before = group->symmetric_ops();
    int64_t collectives = 0;
    for (int64_t s = 0; s < 2; ++s) {
      const StepStats stats = trainer.step(s);
      collectives += stats.comm.gathers + stats.comm.scatters;
    }
    EXPECT_GT(collectives, 0);
    EXPECT_EQ(int64_t(group->symmetric_ops() - before), collectives)
        << fmt::format("{}", fmt::join(keys, " "));
  }
}

// Alone in its shard group a rank accumulates its gradients straight into its FP32 shards: no
// unsharded gradient buffer is budgeted (and none is reduce-scattered: the Trace and Mesh
// tests), except for reduce_each over several micro-batches, which sums each one first.
TEST(Sharding, AloneTheGradientsNeedNoUnshardedBuffer) {
  const bool alone = world().size() == 1;
  const std::vector<std::string> three = {"training.micro_batches=3", "training.global_batch=36"};
  auto budgeted = [&](std::vector<std::string> keys) {
    const Config config = test_config(keys);
    return ShardedTrainer(config, data(), world(), make_model(config)).budget().unsharded_grads;
  };
  EXPECT_EQ(budgeted({}) == 0, alone);
  EXPECT_EQ(budgeted({three[0], three[1], "sharding.accumulation=reduce_last"}) == 0, alone);
  EXPECT_GT(budgeted({three[0], three[1], "sharding.accumulation=reduce_each"}), 0);
}

bool gradients_bitwise_equal(ShardedTrainer& a, ShardedTrainer& b) {
  const std::vector<ShardSpan> sa = a.fsdp().spans(), sb = b.fsdp().spans();
  bool equal = sa.size() == sb.size();
  for (size_t i = 0; equal && i < sa.size(); ++i) {
    const Tensor& x = sa[i].grad;
    const Tensor& y = sb[i].grad;
    equal = x.nbytes() == y.nbytes() && std::memcmp(x.raw(), y.raw(), x.nbytes()) == 0;
  }
  return equal;
}

// Activation checkpointing recomputes with the same kernels on the same inputs: every step's
// loss, this rank's gradient shards and the weights are bitwise those without it, in FP32 and
// BF16, over two micro-batches (recomputation between accumulating backwards).
TEST(Sharding, ActivationCheckpointingIsBitwiseInvisible) {
  for (const char* dtype : {"fp32", "bf16"}) {
    auto config = [&](const char* mode) {
      return test_config({std::string("precision.param_dtype=") + dtype, "training.global_batch=24",
                          "training.micro_batches=2",
                          std::string("sharding.activation_checkpointing=") + mode});
    };
    const Config none_config = config("none");  // trainers keep a reference to their config
    ShardedTrainer none(none_config, data(), world(), make_model(none_config));
    for (const char* mode : {"selective", "full"}) {
      SCOPED_TRACE(fmt::format("{} with activation checkpointing {}", dtype, mode));
      const Config checkpointed_config = config(mode);
      ShardedTrainer checkpointed(checkpointed_config, data(), world(),
                                  make_model(checkpointed_config));
      // Fewer bytes kept, and the mode really is on.
      EXPECT_LT(checkpointed.budget().activations, none.budget().activations);
      ShardedTrainer reference(none_config, data(), world(), make_model(none_config));
      for (int64_t s = 0; s < 3; ++s) {
        const StepStats a = reference.step(s), b = checkpointed.step(s);
        EXPECT_EQ(a.loss, b.loss) << "step " << s;
        EXPECT_EQ(a.grad_norm, b.grad_norm) << "step " << s;
        EXPECT_TRUE(gradients_bitwise_equal(reference, checkpointed)) << "step " << s;
        EXPECT_GT(b.op_ms[size_t(OpKind::recompute)], 0.0) << "step " << s;
        EXPECT_EQ(a.op_ms[size_t(OpKind::recompute)], 0.0) << "step " << s;
      }
      EXPECT_TRUE(weights_bitwise_equal(reference, checkpointed));
    }
  }
}

// Two micro-batches: reduce every micro-batch into the shard, or keep unsharded gradients and
// reduce once. The sums are the same sums in another order (FP32 rounding apart).
TEST(Sharding, AccumulationModesAgree) {
  std::vector<std::string> common = {"precision.param_dtype=fp32", "training.global_batch=24",
                                     "training.micro_batches=2", "training.max_steps=5"};
  auto with = [&](const char* mode) {
    std::vector<std::string> o = common;
    o.push_back(std::string("sharding.accumulation=") + mode);
    return test_config(o);
  };
  const Config each = with("reduce_each"), last = with("reduce_last");
  ShardedTrainer a(each, data(), world(), make_model(each)),
      b(last, data(), world(), make_model(last));
  LocalTrainer reference(each, data());
  for (int64_t s = 0; s < 5; ++s) {
    const double la = a.step(s).loss, lb = b.step(s).loss, lr = reference.step(s).loss;
    EXPECT_NEAR(la, lb, 1e-5 * lr) << "step " << s;
    EXPECT_NEAR(la, lr, 1e-5 * lr) << "step " << s;
  }
  EXPECT_LT(max_weight_diff(a, reference), 1e-4);
  EXPECT_LT(max_weight_diff(b, reference), 1e-4);
}

// Masters, gradients and AdamW's two moments: 16 bytes per element, divided over the ranks.
TEST(Sharding, PersistentStateIsDividedByTheWorldSize) {
  const Config config = test_config({"training.max_steps=1"});
  ShardedTrainer sharded(config, data(), world(), make_model(config));
  sharded.step(0);  // the optimizer state exists after the first step
  int64_t params = 0;
  for (const auto& spec : sharded.model().param_specs()) params += spec.numel();
  const int64_t mine = sharded.fsdp().memory().shard_bytes + sharded.optimizer_state_bytes();
  // Every rank holds the same amount: the padding goes to the last shard of each unit.
  Tensor all = Tensor::zeros("bytes", {world().size()}, DType::f64);
  all.data<double>()[world().rank()] = double(mine);
  world().all_reduce(all)->wait();
  const int W = world().size();
  const int64_t units = int64_t(sharded.fsdp().units().size());
  // Together the ranks hold 16 bytes per element, plus 8 per padding element (master and
  // gradient shards are padded; the optimizer keeps state for real elements only), and the
  // padding is under W elements per unit.
  double total = 0;
  for (int r = 0; r < W; ++r) total += all.data<double>()[r];
  EXPECT_GE(total, 16.0 * double(params));
  EXPECT_LT(total, 16.0 * double(params) + 8.0 * double(units * W));
  // Each rank holds a 1/W part of one rank's 16 * params, give or take its padding.
  for (int r = 0; r < W; ++r)
    EXPECT_NEAR(all.data<double>()[r] * W, 16.0 * double(params), 16.0 * double(units * W * W))
        << "rank " << r;
}

// A GPT of more than 1 GiB in FP32 is built on meta and only the local shards materialize.
TEST(Sharding, MetaInitOfAGigabyteModelMaterializesOnlyTheShard) {
  // One rank would own the whole model: the bound below is about sharding (CTest runs this
  // test from 2 ranks up).
  ASSERT_GE(world().size(), 2);
#ifdef SHARDTRAIN_SANITIZED
  // A quarter of the size: the initialization's RNG runs ~10x slower under the sanitizers, and
  // what is checked there (allocation = the shards) does not depend on the size.
  constexpr int64_t kLayers = 6, kMinBytes = int64_t(1) << 28;
#else
  constexpr int64_t kLayers = 22, kMinBytes = int64_t(1) << 30;
#endif
  GPTConfig big{
      .n_layer = kLayers, .n_embd = 1024, .n_head = 16, .block_size = 128, .vocab_size = 256};
  const int64_t before = tensor_memory().current_bytes;
  GPT model(big, DType::bf16);
  EXPECT_EQ(tensor_memory().current_bytes, before) << "building on meta allocated memory";
  int64_t params = 0;
  for (const auto& spec : model.param_specs()) params += spec.numel();
  ASSERT_GE(4 * params, kMinBytes) << "the test model is smaller than intended";

  reset_tensor_memory_peak();
  reset_peak_rss();
  const double rss_before = current_rss_mib();
  DeviceMesh mesh(world(), MeshShape{.dp_shard = world().size()});
  FsdpRuntime fsdp(model, mesh, {}, 1234);
  const int64_t shard_bytes = fsdp.memory().shard_bytes;  // FP32 master + gradient
  const int64_t allocated = tensor_memory().peak_bytes - before;
  EXPECT_EQ(allocated, shard_bytes) << "init allocated beyond the shards";
  EXPECT_LE(shard_bytes, 8 * (params / world().size() + 64));
  // The process's resident memory grew by the shard, not by the model (64 MiB of slack).
#ifndef SHARDTRAIN_SANITIZED  // ASan's shadow (1/8 of each allocation) adds to the RSS
  const double rss_growth = peak_rss_mib() - rss_before;
  EXPECT_LT(rss_growth, double(shard_bytes) / (1 << 20) + 64) << "MiB";
#else
  (void)rss_before;
#endif
  // Spot check: owned elements hold exactly the counter-based RNG's values for their index.
  for (const ShardSpan& span : fsdp.spans()) {
    if (span.name.find("mlp.c_fc.weight") == std::string::npos) continue;
    const auto& specs = model.param_specs();
    const size_t index =
        size_t(std::find_if(specs.begin(), specs.end(),
                            [&](const ParamSpec& p) { return p.name == span.name; }) -
               specs.begin());
    const UnitLayout& layout = fsdp.units()[size_t(specs[index].unit)];
    const auto segments = layout.segments(specs, world().rank());
    for (const ShardSegment& seg : segments) {
      if (seg.param != index) continue;
      float want = 0;
      init_param_elements(specs[index], 1234, index, uint64_t(seg.param_offset), 1, &want);
      EXPECT_EQ(span.master.data<float>()[0], want) << span.name;
    }
    break;
  }
}

// The MLP's rows of step `step`: tokens from a fixed pattern, each row's target its next token.
Batch mlp_rows(int64_t step, int64_t first, int64_t rows, int64_t T, int64_t vocab) {
  Batch b{Tensor::empty("inputs", {rows, T}, DType::i32),
          Tensor::empty("targets", {rows, T}, DType::i32)};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < T; ++t) {
      const int64_t token = (7 * (first + r) + 3 * t + 5 * step) % vocab;
      b.inputs.data<int32_t>()[r * T + t] = int32_t(token);
      b.targets.data<int32_t>()[r * T + t] = int32_t((token * token + 1) % vocab);
    }
  return b;
}

// A unit smaller than the world leaves the last ranks only padding (fc1 has 2 elements, fc2's
// weight and bias 16 + 16 = 32): at 3 and 4 ranks rank 2 and 3 own nothing of fc1, yet take
// part in its gathers and reductions. FP32 training equals one rank's: the same losses to
// 1e-6 relative and the same weights to 1e-5 (measured: the sums' order only, ~1e-7).
TEST(Sharding, RanksOwningOnlyPaddingTrainAsOneRank) {
  const MLPConfig shape{.vocab_size = 16, .n_embd = 1, .hidden = 1};
  ShardPolicy policy;
  policy.fsdp.param_dtype = DType::f32;
  policy.seed = 7;
  MLP sharded_model(shape, DType::f32), local_model(shape, DType::f32);
  auto sharded = fully_shard(sharded_model, world(), policy);
  auto one = FakeProcessGroup::create(1);
  auto local = fully_shard(local_model, *one.front(), policy);
  const int W = world().size();
  if (W >= 3) {
    const FsdpRuntime& fsdp = sharded->runtime();
    EXPECT_TRUE(fsdp.units()[1].segments(sharded_model.param_specs(), W - 1).empty())
        << "fc1's last shard should be padding only at " << W << " ranks";
  }
  const int64_t rows = 12, T = 4;  // 12 rows split over 1-4 ranks
  ASSERT_EQ(rows % W, 0);
  double worst_loss = 0, first_loss = 0, last_loss = 0;
  for (int64_t step = 0; step < 8; ++step) {
    const int64_t mine = rows / W, first = world().rank() * mine;
    const StepResult a =
        sharded->step({mlp_rows(step, first, mine, T, shape.vocab_size)}, rows * T, 0.05f);
    const StepResult b =
        local->step({mlp_rows(step, 0, rows, T, shape.vocab_size)}, rows * T, 0.05f);
    EXPECT_NEAR(a.loss, b.loss, 1e-6 * b.loss) << "step " << step;
    EXPECT_NEAR(a.grad_norm, b.grad_norm, 1e-5 * b.grad_norm) << "step " << step;
    worst_loss = std::max(worst_loss, std::fabs(a.loss - b.loss) / b.loss);
    (step == 0 ? first_loss : last_loss) = b.loss;
  }
  EXPECT_LT(last_loss, first_loss) << "the reference does not learn: the test compares nothing";
  const auto& specs = sharded_model.param_specs();
  double worst = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const Tensor x = sharded->runtime().gather_master(i), y = local->runtime().gather_master(i);
    for (int64_t k = 0; k < x.numel(); ++k)
      worst = std::max(worst, double(std::fabs(x.data<float>()[k] - y.data<float>()[k])));
  }
  report("padding-only ranks", worst_loss, worst);
  EXPECT_LT(worst, 1e-5);
}

}  // namespace
}  // namespace st

#include <map>

#include "core/file_io.hpp"
#include "launch/trace_session.hpp"

namespace st {
namespace {

// The merged trace: one process per rank with a compute and a communication track, spans
// properly nested on every track, and every collective issued on every rank present.
TEST(Trace, MergedTraceHasEveryRankNestedSpansAndEveryCollective) {
  const std::string path = testing::shared_dir(world(), "trace") + "/trace.json";
  const Config config = test_config({"training.max_steps=4"});
  ShardedTrainer trainer(config, data(), world(), make_model(config));
  TraceSession trace(world(), path, "2..3");
  for (int64_t s = 0; s < 4; ++s) {
    trace.begin_step(s);
    trainer.step(s);
    trace.end_step(s);
  }
  const int64_t written = trace.write();
  if (world().rank() != 0) return;
  EXPECT_GT(written, 0);
  const auto json = nlohmann::json::parse(read_text_file(path));
  std::filesystem::remove(path);
  const int W = world().size();
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> tracks;
  std::map<int, std::multiset<std::string>> collectives;
  std::set<int> named_processes;
  int steps_seen = 0;
  for (const auto& e : json["traceEvents"]) {
    if (e["ph"] == "M") {
      if (e["name"] == "process_name") named_processes.insert(e["pid"].get<int>());
      continue;
    }
    const int p = e["pid"], t = e["tid"];
    ASSERT_TRUE(p >= 0 && p < W && (t == 0 || t == 1)) << e.dump();
    tracks[{p, t}].push_back(
        {e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()});
    std::string name = e["name"];
    if (p == 0 && name.rfind("step ", 0) == 0) ++steps_seen;
    if (t == 1) {
      // "all_gather #12 on group 'world' (rank 1 of 4, ...)": the same op on every rank.
      const size_t a = name.find("(rank "), b = name.find(" of ");
      collectives[p].insert(name.erase(a, b - a));
    }
  }
  EXPECT_EQ(steps_seen, 2) << "trace_steps 2..3 records two steps";
  EXPECT_EQ(int(named_processes.size()), W);
  for (int r = 0; r < W; ++r) {
    EXPECT_FALSE(tracks[std::make_pair(r, 0)].empty()) << "rank " << r << " has no compute spans";
    EXPECT_FALSE(collectives[r].empty()) << "rank " << r << " has no collectives";
    EXPECT_EQ(collectives[r], collectives[0]) << "rank " << r << " saw other collectives";
  }
  bool gathers = false, scatters = false;
  for (const auto& c : collectives[0]) {
    gathers = gathers || c.rfind("all_gather", 0) == 0;
    scatters = scatters || c.rfind("reduce_scatter", 0) == 0;
  }
  EXPECT_TRUE(gathers);
  // Alone, a rank's backward writes its gradient shards in place: nothing to reduce-scatter.
  EXPECT_EQ(scatters, W > 1);
  // Nesting: sorted by start (longer first on ties), every span ends before its enclosing one.
  for (auto& [key, spans] : tracks) {
    std::sort(spans.begin(), spans.end(), [](const auto& x, const auto& y) {
      return x.first < y.first || (x.first == y.first && x.second > y.second);
    });
    std::vector<double> open;  // end times of the enclosing spans
    for (const auto& [begin, end] : spans) {
      while (!open.empty() && open.back() <= begin + 1e-3) open.pop_back();
      if (!open.empty()) {
        EXPECT_LE(end, open.back() + 1e-3)
            << "rank " << key.first << " track " << key.second << ": a span starting at " << begin
            << " overlaps its neighbour without nesting";
      }
      open.push_back(end);
    }
  }
}

}  // namespace
}  // namespace st
