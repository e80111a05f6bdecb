// The 2-D mesh under mpirun: FSDP (shard = world), HSDP (replicas x shards) and DDP (shard 1)
// each against the unsharded single-process trainer, replica_sync, initial weights, and a
// checkpoint carried through a chain of meshes and world sizes.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "collectives/mpi_process_group.hpp"
#include "core/error.hpp"
#include "core/ops/quantize.hpp"
#include "launch/model_factory.hpp"
#include "launch/sharded_trainer.hpp"
#include "models/family.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/local_trainer.hpp"
#include "tests/support/shared_dir.hpp"

namespace st {
namespace {

using testing::data;
using testing::max_weight_diff;
using testing::test_config;
using testing::world;

struct Mesh {
  std::string name;
  std::vector<std::string> keys;
  int replicas;
  int tp = 1;
  int pp = 1;
};

// Whether the family under test has a tensor-parallel plan, and whether its split over `tp`
// ranks fits the test model (tp dividing its heads, KV heads, MLP width and vocabulary).
bool family_has_tp_plan() {
  return model_family(test_config().model.family).build_slice != nullptr;
}
bool tp_fits(int tp) {
  const Config config = test_config();
  try {
    model_family(config.model.family).check_tensor_parallel(config.model, tp);
    return true;
  } catch (const InputError&) {
    return false;
  }
}

// The model a rank trains under `config`: its slices where the mesh has TP.
std::unique_ptr<Model> trainer_model(const Config& config) {
  return make_model(config, tp_slice_of(config, world().rank(), world().size()));
}

// Every mesh a world of this size has: FSDP over all, DDP, and HSDP with shard groups of half
// the world, each a pretend node (sharding.ranks_per_node), when the world splits in two; with
// tensor parallelism where the family has a plan (with sequence parallelism, its default): TP
// over 2 ranks, with and without it; over 4: FSDP 2 x TP 2, DDP 2 x TP 2 and TP 4 where it
// fits (HSDP x TP needs 8 ranks).
std::vector<Mesh> meshes(int world_size) {
  const std::string w = std::to_string(world_size);
  std::vector<Mesh> m = {
      {"FSDP " + w, {"sharding.shard_degree=" + w, "sharding.replicate_degree=1"}, 1},
      {"DDP " + w, {"sharding.shard_degree=1", "sharding.replicate_degree=" + w}, world_size}};
  if (world_size >= 4 && world_size % 2 == 0) {
    const std::string half = std::to_string(world_size / 2);
    m.push_back({"HSDP 2x" + half,
                 {"sharding.shard_degree=" + half, "sharding.replicate_degree=2",
                  "sharding.ranks_per_node=" + half},
                 2});
  }
  if (!family_has_tp_plan()) return m;
  const auto tp_mesh = [](std::string name, int dp_shard, int dp_replicate, int tp,
                          bool sequence_parallel = true) {
    return Mesh{
        std::move(name),
        {fmt::format("parallel.dp_shard={}", dp_shard),
         fmt::format("parallel.dp_replicate={}", dp_replicate), fmt::format("parallel.tp={}", tp),
         fmt::format("parallel.sequence_parallel={}", sequence_parallel),
         // On 2 emulated hosts (hosts.mesh.*) TP 4 spans both: allowed, to run it there.
         "parallel.allow_cross_node_tp=true"},
        dp_replicate,
        tp};
  };
  if (world_size == 2) {
    m.push_back(tp_mesh("TP 2", 1, 1, 2));
    m.push_back(tp_mesh("TP 2 without sequence parallelism", 1, 1, 2, false));
  }
  if (world_size == 4) {
    m.push_back(tp_mesh("FSDP 2 x TP 2", 2, 1, 2));
    m.push_back(tp_mesh("DDP 2 x TP 2", 1, 2, 2));
    // Llama's and Qwen3's 2 KV heads are shared by pairs of ranks at TP 4.
    if (tp_fits(4)) m.push_back(tp_mesh("TP 4", 1, 1, 4));
  }
  return m;
}

// After training with TP: every parameter TP does not split (norms, wpe, row-parallel biases)
// is held by each TP rank and must stay bitwise the same on all of them (their gradients come
// from the same bits, through all-reduces whose result every rank shares).
void expect_replicated_parameters_agree(ShardedTrainer& t, const std::string& what) {
  ProcessGroup* tp = t.mesh().tp_group();
  ASSERT_NE(tp, nullptr) << what;
  int compared = 0;
  const auto& specs = t.model().param_specs();
  for (size_t i = 0; i < specs.size(); ++i) {
    // (A pipeline stage compares its own; the TP group lies within one.)
    if (specs[i].sliced() || !t.fsdp().holds(specs[i].unit)) continue;
    const Tensor mine = t.fsdp().gather_master(i);
    Tensor all = Tensor::empty("all", {tp->size() * mine.numel()}, DType::f32);
    tp->all_gather(mine, all)->wait();
    for (int r = 1; r < tp->size(); ++r)
      EXPECT_EQ(std::memcmp(all.data<float>(), all.data<float>() + r * mine.numel(), mine.nbytes()),
                0)
          << what << ": " << specs[i].name << " differs between TP ranks 0 and " << r;
    ++compared;
  }
  EXPECT_GT(compared, 0) << what;
}

// Pipeline meshes at 2-4 ranks, each schedule with and without FSDP and TP inside the stages
// (models of 4 blocks where a mesh has more stages than the test model's 2).
std::vector<Mesh> pipeline_meshes(int world_size) {
  // dp_replicate: the rest of the world.
  const auto pp_mesh = [world_size](std::string name, int pp, int dp_shard, int tp,
                                    const char* schedule, int virtual_stages, int micro_batches,
                                    int n_layer) {
    return Mesh{std::move(name),
                {fmt::format("parallel.pp={}", pp), fmt::format("parallel.dp_shard={}", dp_shard),
                 fmt::format("parallel.tp={}", tp), "parallel.dp_replicate=-1",
                 fmt::format("parallel.pp_schedule={}", schedule),
                 fmt::format("parallel.pp_virtual_stages={}", virtual_stages),
                 fmt::format("training.micro_batches={}", micro_batches),
                 fmt::format("model.n_layer={}", n_layer)},
                world_size / (pp * dp_shard * tp),
                tp,
                pp};
  };
  std::vector<Mesh> m;
  if (world_size == 2) {
    m.push_back(pp_mesh("PP 2 1f1b", 2, 1, 1, "1f1b", 1, 3, 2));
    m.push_back(pp_mesh("PP 2 gpipe", 2, 1, 1, "gpipe", 1, 2, 2));
    m.push_back(pp_mesh("PP 2 zero bubble", 2, 1, 1, "zero_bubble", 1, 4, 2));
    m.push_back(pp_mesh("PP 2 interleaved", 2, 1, 1, "interleaved_1f1b", 2, 4, 4));
  }
  if (world_size == 3) {
    m.push_back(pp_mesh("PP 3 1f1b", 3, 1, 1, "1f1b", 1, 4, 3));
    m.push_back(pp_mesh("PP 3 zero bubble", 3, 1, 1, "zero_bubble", 1, 4, 3));
  }
  if (world_size == 4) {
    m.push_back(pp_mesh("PP 4 1f1b", 4, 1, 1, "1f1b", 1, 4, 4));
    m.push_back(pp_mesh("PP 2 x FSDP 2 interleaved", 2, 2, 1, "interleaved_1f1b", 2, 2, 4));
    if (family_has_tp_plan()) m.push_back(pp_mesh("PP 2 x TP 2 1f1b", 2, 1, 2, "1f1b", 1, 3, 2));
    m.push_back(pp_mesh("PP 2 x DDP 2 zero bubble", 2, 1, 1, "zero_bubble", 1, 2, 2));
  }
  return m;
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(Mesh, InitialWeightsAreBitwiseTheSameOnEveryMesh) {
  for (const Mesh& mesh : meshes(world().size())) {
    const Config config = test_config(mesh.keys);
    ShardedTrainer sharded(config, data(), world(), trainer_model(config));
    LocalTrainer local(config, data());
    for (size_t i = 0; i < local.model().param_specs().size(); ++i) {
      const Tensor got = sharded.whole_master(i);
      EXPECT_EQ(std::memcmp(got.raw(), local.params().master(i).raw(), got.nbytes()), 0)
          << mesh.name << ": " << local.model().param_specs()[i].name;
    }
  }
}

struct Tolerance {
  double loss_rel, norm_rel, weight_abs;
};

// 20 steps on `mesh` beside the unsharded reference. The gradient norm is compared too: a mesh
// that counted each replica's gradient shard once more would be off by sqrt(replicas).
void expect_mesh_matches(const Mesh& mesh, std::vector<std::string> extra, Tolerance tol) {
  const Config config = test_config(with(mesh.keys, extra));
  ShardedTrainer sharded(config, data(), world(), trainer_model(config));
  LocalTrainer local(config, data());
  double worst = 0;
  for (int64_t s = 0; s < config.training.max_steps; ++s) {
    const StepStats a = sharded.step(s), b = local.step(s);
    worst = std::max(worst, std::fabs(a.loss - b.loss) / b.loss);
    EXPECT_NEAR(a.loss, b.loss, tol.loss_rel * b.loss) << mesh.name << " step " << s;
    EXPECT_NEAR(a.grad_norm, b.grad_norm, tol.norm_rel * b.grad_norm) << mesh.name << " step " << s;
    // TP's collectives are counted, byte for byte what the traffic prediction names (the
    // model's work's: activations, the loss's per-row max and sums, the norms' gradients, and
    // shared KV heads' once a step); none without TP.
    // (The prediction counts every block's: a pipeline stage runs its own alone.)
    const double predicted = double(sharded.traffic().tp_reduced);
    EXPECT_EQ(a.comm.tp_collectives > 0, mesh.tp > 1) << mesh.name;
    if (mesh.pp == 1) {
      EXPECT_EQ(double(a.comm.tp_bytes), predicted) << mesh.name;
    }
  }
  // FSDP's all-gathers and reduce-scatters within a node read their peers' buffers in place,
  // from symmetric memory (collectives/symmetric_heap.hpp).
  if (auto* shard = dynamic_cast<MpiProcessGroup*>(&sharded.mesh().shard_group());
      shard && shard->size() > 1 && shard->single_node()) {
    EXPECT_GT(shard->symmetric_capacity(), 0u) << mesh.name;
    EXPECT_GT(shard->symmetric_ops(), 0u) << mesh.name;
  }
  // So do TP's activation collectives: the model's operands live in the TP group's. Each
  // block's forward alone sums its two row-parallel outputs (and gathers the norms' outputs
  // under sequence parallelism) in every step; all of those in place.
  if (auto* tp = dynamic_cast<MpiProcessGroup*>(sharded.mesh().tp_group());
      tp && tp->single_node() && mesh.pp == 1) {
    EXPECT_GT(tp->symmetric_capacity(), 0u) << mesh.name;
    EXPECT_GE(tp->symmetric_ops(), uint64_t(2 * config.model.n_layer * config.training.max_steps))
        << mesh.name;
  }
  if (mesh.pp > 1) {
    // Activations and their gradients crossed between stages; zero bubble's weight halves were
    // deferred (their operands held), no other schedule's.
    const PipelineStats& pipe = sharded.sharded().pipeline()->stats();
    EXPECT_GT(pipe.sent_bytes + pipe.received_bytes, 0) << mesh.name;
    EXPECT_EQ(pipe.deferred_bytes > 0, config.parallel.pp_schedule == PipeSchedule::zero_bubble)
        << mesh.name;
  }
  const double diff = max_weight_diff(sharded, local);
  EXPECT_LT(diff, tol.weight_abs) << mesh.name;
  // The validation loss: windows split over the shard groups, each counted once.
  const double val = sharded.evaluate(24), want_val = local.evaluate(24);
  EXPECT_NEAR(val, want_val, tol.loss_rel * want_val) << mesh.name << " validation";
  if (mesh.tp > 1) expect_replicated_parameters_agree(sharded, mesh.name);
  if (world().rank() == 0)
    std::printf(
        "  %s (%s, %s): worst relative loss difference %.3g, worst weight difference %.3g\n",
        mesh.name.c_str(), sharded.mesh().describe().c_str(),
        std::string(dtype_name(config.precision.param_dtype)).c_str(), worst, diff);
}

// FP32: the tolerances of the FSDP tests (tests/test_sharding.cpp), which say why.
TEST(Mesh, Fp32TrainingMatchesTheUnshardedTrainerOnEveryMesh) {
  int tp_meshes = 0;
  for (const Mesh& mesh : meshes(world().size())) {
    expect_mesh_matches(mesh, {"precision.param_dtype=fp32"},
                        {.loss_rel = 1e-5, .norm_rel = 1e-4, .weight_abs = 1e-4});
    tp_meshes += mesh.tp > 1;
  }
  // At 2 and 4 ranks a family with a TP plan trains on TP meshes too.
  if (family_has_tp_plan() && world().size() % 2 == 0) {
    EXPECT_GT(tp_meshes, 0);
  }
}

// The loss within FSDP's bound on every mesh. The gradient norm of a TP mesh gets 5e-2: its
// forward sums every row-parallel output in another order than one rank (FSDP's forward is
// bitwise one rank's), and the BF16 roundings downstream amplify that; on an AVX-512 Xeon
// without AVX512-BF16 single steps of TP 2 (GPT-2, Llama) differed by 2.1-2.7% in the norm
// while the losses stayed within 4.1e-4.
// TP's norms within 10%: its slices' BF16 matmuls round in other places, and one step of Llama's
// run amplifies that (TP 4 on the AMD EPYC with AVX512-BF16: 5.6% at step 12, losses 9e-5).
TEST(Mesh, Bf16TrainingMatchesTheUnshardedTrainerOnEveryMesh) {
  for (const Mesh& mesh : meshes(world().size()))
    expect_mesh_matches(
        mesh, {"precision.param_dtype=bf16"},
        {.loss_rel = 2e-3, .norm_rel = mesh.tp > 1 ? 0.1 : 2e-2, .weight_abs = 3e-2});
}

// Pipeline parallelism meets FSDP's bar: the same initial weights as one rank, bitwise, and
// the FP32 training of the unsharded trainer with the same micro-batches to rounding, for every
// schedule, alone and with FSDP and TP inside the stages (at 2-4 ranks; a world of one fails).
TEST(Mesh, PipelineMatchesTheUnshardedTrainer) {
  const std::vector<Mesh> m = pipeline_meshes(world().size());
  ASSERT_FALSE(m.empty()) << "no pipeline mesh at " << world().size() << " ranks";
  for (const Mesh& mesh : m) {
    const Config config = test_config(with(mesh.keys, {"precision.param_dtype=fp32"}));
    {
      ShardedTrainer sharded(config, data(), world(), trainer_model(config));
      ASSERT_NE(sharded.sharded().pipeline(), nullptr) << mesh.name;
      LocalTrainer local(config, data());
      for (size_t i = 0; i < local.model().param_specs().size(); ++i) {
        const Tensor got = sharded.whole_master(i);
        EXPECT_EQ(std::memcmp(got.raw(), local.params().master(i).raw(), got.nbytes()), 0)
            << mesh.name << ": " << local.model().param_specs()[i].name;
      }
    }
    // The loss to 1e-6, the weights to FSDP's bound. Each unit's gradient adds the
    // micro-batches product by product (reduce_last's order), and one step of this model's
    // run amplifies that rounding in the norm: one rank alone with 4 micro-batches and
    // reduce_last against reduce_each differs by 9.8e-5 there; a pipeline by up to 1.9e-4.
    expect_mesh_matches(mesh, {"precision.param_dtype=fp32"},
                        {.loss_rel = 1e-6, .norm_rel = 5e-4, .weight_abs = 1e-4});
  }
  // BF16 (the default precision; the residual stream crosses the stage boundaries in FP32): the
  // first mesh of each world within FSDP's BF16 bounds for the loss and the weights. Not the
  // norm, but for a gross error (4x): Llama's run has spikes whose norm BF16's rounding order
  // moves, not the loss: step 16 (5.0 against 0.9-1.1 around it) moves by 40% on one rank
  // alone between reduce_each and reduce_last on the Intel Xeon, and on the AMD EPYC with
  // AVX512-BF16 step 14 spikes to 7.0 on one rank against 1.7 under PP 3 (losses 7e-4 apart).
  // At 2 and 3 ranks (the 4-rank meshes' BF16 paths are the same code, oversubscribed).
  if (world().size() < 4)
    expect_mesh_matches(m.front(), {"precision.param_dtype=bf16"},
                        {.loss_rel = 2e-3, .norm_rel = 4.0, .weight_abs = 3e-2});
}

// Three micro-batches (36 rows: 1-4 ranks x 3 divide it): all-reducing across replicas after each
// or only after the last gives the same sums in another order, and each matches the unsharded
// reference trainer (FP32, to rounding). Meshes with replicas exist from 2 ranks on: CTest runs
// this test at 2-4 ranks (tests/CMakeLists.txt), and a world of one fails it.
TEST(Mesh, ReplicaSyncLastEqualsEachAndTheReference) {
#ifdef SHARDTRAIN_SANITIZED
  constexpr int64_t kSteps = 3;  // the same code every step after the warm-up's 2
#else
  constexpr int64_t kSteps = 6;
#endif
  const std::vector<std::string> common = {"precision.param_dtype=fp32", "training.micro_batches=3",
                                           "training.global_batch=36",
                                           "training.max_steps=" + std::to_string(kSteps)};
  // The reference knows no mesh, accumulation or sync mode: one run serves every case.
  const Config reference_config = test_config(common);
  LocalTrainer local(reference_config, data());  // holds the config by reference
  std::vector<double> reference;
  for (int64_t s = 0; s < kSteps; ++s) reference.push_back(local.step(s).loss);
  int compared = 0;
  for (const Mesh& mesh : meshes(world().size())) {
    if (mesh.replicas == 1) continue;  // nothing to all-reduce
    for (const char* accumulation : {"reduce_each", "reduce_last"})
      for (const char* sync : {"each", "last"}) {
        const Config config = test_config(
            with(with(mesh.keys, common), {std::string("sharding.accumulation=") + accumulation,
                                           std::string("sharding.replica_sync=") + sync}));
        ShardedTrainer t(config, data(), world(), trainer_model(config));
        for (int64_t s = 0; s < kSteps; ++s)
          EXPECT_NEAR(t.step(s).loss, reference[size_t(s)], 1e-5 * reference[size_t(s)])
              << mesh.name << " " << accumulation << " replica_sync " << sync << " step " << s;
        EXPECT_LT(max_weight_diff(t, local), 1e-4)
            << mesh.name << " " << accumulation << " replica_sync " << sync;
        ++compared;
      }
  }
  EXPECT_GT(compared, 0) << "no mesh with replicas at " << world().size()
                         << " rank(s): run at 2-4 ranks";
}

// One mesh with replicas (and `extra` keys) trained with and without symmetric memory.
void expect_replicas_in_place(const Mesh& mesh, const std::vector<std::string>& extra) {
  constexpr int64_t kSteps = 3;
  const bool ddp_in_place = mesh.replicas == world().size() && extra.empty();
  std::vector<double> losses[2];
  std::vector<Config> configs;
  for (const char* symmetric : {"true", "false"})
    configs.push_back(test_config(
        with(with(mesh.keys, extra), {"training.max_steps=3", "precision.param_dtype=fp32",
                                      std::string("sharding.symmetric_memory=") + symmetric})));
  std::vector<std::unique_ptr<ShardedTrainer>> trainers;
  for (size_t k = 0; k < 2; ++k) {
    trainers.push_back(
        std::make_unique<ShardedTrainer>(configs[k], data(), world(), trainer_model(configs[k])));
    ShardedTrainer& t = *trainers.back();
    auto* replicas = dynamic_cast<MpiProcessGroup*>(t.mesh().replica_group());
    ASSERT_NE(replicas, nullptr) << mesh.name;
    const uint64_t before = replicas->symmetric_ops();
    int64_t replications = 0, scatters = 0;
    for (int64_t s = 0; s < kSteps; ++s) {
      const StepStats st = t.step(s);
      losses[k].push_back(st.loss);
      replications += st.comm.replications;
      scatters += st.comm.scatters;
    }
    const std::string what =
        fmt::format("{} {} symmetric_memory={}", mesh.name, fmt::join(extra, " "), k == 0);
    EXPECT_GT(replications, 0) << what;
    const int64_t in_place = int64_t(replicas->symmetric_ops() - before);
    if (k == 1 || !replicas->single_node()) {
      EXPECT_EQ(in_place, 0) << what;
    } else if (extra.empty()) {
      EXPECT_EQ(in_place, replications) << what;  // every sync
    } else {
      // 3 micro-batches: the shards' syncs, and later micro-batches' partial sums as long as
      // their room holds them (the first of each step's always does).
      EXPECT_GT(in_place, replications / 3) << what;
      EXPECT_LE(in_place, replications) << what;
    }
    if (ddp_in_place) {
      EXPECT_EQ(scatters, 0) << what;
      EXPECT_EQ(t.budget().unsharded_grads, 0) << what;
    }
  }
  for (int64_t s = 0; s < kSteps; ++s)
    EXPECT_NEAR(losses[0][size_t(s)], losses[1][size_t(s)],
                mesh.replicas == 2 ? 0.0 : 1e-6 * losses[1][size_t(s)])
        << mesh.name << " step " << s;
  double worst = 0;  // gathered weights, in place against MPI's sums
  for (size_t i = 0; i < trainers[0]->model().param_specs().size(); ++i) {
    const Tensor a = trainers[0]->whole_master(i), b = trainers[1]->whole_master(i);
    for (int64_t k = 0; k < a.numel(); ++k)
      worst = std::max(worst, double(std::fabs(a.data<float>()[k] - b.data<float>()[k])));
  }
  // More replicas sum in another order than MPI's, and AdamW's step on near-zero gradients
  // magnifies the last bit (2.3e-4 in BF16 under the sanitizers): FP32, within the bar of the
  // unsharded reference (ReplicaSyncLastEqualsEachAndTheReference).
  EXPECT_LE(worst, mesh.replicas == 2 ? 0.0 : 1e-4)
      << fmt::format("{} {}", mesh.name, fmt::join(extra, " "));
}

// Replicas on one node sum their FP32 gradient shards (and, under reduce_each with
// replica_sync each, later micro-batches' partial sums while their room lasts) in place, in the
// replica group's symmetric memory: every shard's all-reduce is in place, and under DDP the
// backward writes the shards themselves (no reduce-scatter, no unsharded gradient budgeted).
// With symmetric memory off MPI's all-reduce sums the same values: the same losses and weights
// (bit for bit at 2 replicas, where a sum has one order; FP32). Across nodes nothing is in place.
TEST(Mesh, ReplicasOnANodeSumTheirGradientShardsInPlace) {
  std::vector<Mesh> with_replicas;
  for (const Mesh& mesh : meshes(world().size()))
    if (mesh.replicas > 1 && mesh.tp == 1) with_replicas.push_back(mesh);
  if (world().size() == 4)  // the meshes' HSDP puts its replicas on 2 nodes
    with_replicas.push_back(
        {"HSDP 2 x 2 on one node", {"sharding.shard_degree=2", "sharding.replicate_degree=2"}, 2});
  for (const Mesh& mesh : with_replicas)
    for (const std::vector<std::string>& extra :
         {std::vector<std::string>{}, {"training.micro_batches=3", "training.global_batch=36"}})
      expect_replicas_in_place(mesh, extra);
  EXPECT_FALSE(with_replicas.empty())
      << "no mesh with replicas at " << world().size() << " rank(s): run at 2-4 ranks";
}

// The replica all-reduce moves only the gradient shards, and replica_sync = last moves them
// once instead of once per micro-batch.
TEST(Mesh, ReplicaBytesFollowTheSyncMode) {
  int compared = 0;
  for (const Mesh& mesh : meshes(world().size())) {
    if (mesh.replicas == 1) continue;
    ++compared;
    int64_t bytes[2];
    for (int k = 0; k < 2; ++k) {
      const Config config = test_config(
          with(mesh.keys,
               {"training.micro_batches=3", "training.global_batch=36", "training.max_steps=1",
                k == 0 ? "sharding.replica_sync=each" : "sharding.replica_sync=last"}));
      ShardedTrainer t(config, data(), world(), trainer_model(config));
      const StepStats st = t.step(0);
      bytes[k] = st.comm.replicated_bytes;
      int64_t shard_bytes = 0;
      for (const UnitLayout& u : t.fsdp().units()) shard_bytes += 4 * u.shard_numel;
      EXPECT_EQ(bytes[k], shard_bytes * (k == 0 ? 3 : 1)) << mesh.name;
      // The summary's prediction is the runtime's own count.
      const Traffic predicted = t.traffic();
      EXPECT_EQ(predicted.gathered, st.comm.gathered_bytes) << mesh.name;
      EXPECT_EQ(predicted.scattered, st.comm.scattered_bytes) << mesh.name;
      EXPECT_EQ(predicted.replicated, st.comm.replicated_bytes) << mesh.name;
    }
  }
  EXPECT_GT(compared, 0) << "no mesh with replicas at " << world().size()
                         << " rank(s): run at 2-4 ranks";
}

// The summary's traffic prediction (parallel/fsdp/traffic.hpp) counts what the runtime moves, for
// every mesh, with and without resharding, in both accumulation modes.
TEST(Mesh, TrafficPredictionIsTheRuntimesCount) {
  for (const Mesh& mesh : meshes(world().size()))
    for (const char* reshard : {"true", "false", "2"})
      for (const char* accumulation : {"reduce_each", "reduce_last"}) {
        if (std::string(reshard) == "2" &&
            (mesh.replicas != 1 || mesh.tp != 1 || world().size() != 4))
          continue;
        const Config config =
            test_config(with(mesh.keys, {"training.micro_batches=3", "training.global_batch=36",
                                         "training.max_steps=1",
                                         std::string("sharding.reshard_after_forward=") + reshard,
                                         std::string("sharding.accumulation=") + accumulation}));
        ShardedTrainer t(config, data(), world(), trainer_model(config));
        const StepStats st = t.step(0);
        const Traffic predicted = t.traffic();
        const std::string what = mesh.name + " reshard " + reshard + " " + accumulation;
        EXPECT_EQ(predicted.gathered, st.comm.gathered_bytes) << what;
        EXPECT_EQ(predicted.scattered, st.comm.scattered_bytes) << what;
        EXPECT_EQ(predicted.replicated, st.comm.replicated_bytes) << what;
        EXPECT_EQ(predicted.regathered, st.comm.regathered_bytes) << what;
      }
}

// TP's collectives as predicted (tp_collective_bytes) under each activation checkpointing mode,
// whose recomputations gather the norms and reduce the attention's output again: the runtime's
// count is the prediction, byte for byte.
TEST(Mesh, TensorParallelTrafficPredictionHoldsUnderCheckpointing) {
  int tp_meshes = 0;
  for (const Mesh& mesh : meshes(world().size())) {
    if (mesh.tp == 1) continue;
    ++tp_meshes;
    for (const char* mode : {"none", "selective", "full"}) {
      const Config config =
          test_config(with(mesh.keys, {"training.max_steps=1", "training.micro_batches=2",
                                       "training.global_batch=24",
                                       std::string("sharding.activation_checkpointing=") + mode}));
      ShardedTrainer t(config, data(), world(), trainer_model(config));
      const StepStats st = t.step(0);
      const double predicted = double(t.traffic().tp_reduced);
      EXPECT_EQ(double(st.comm.tp_bytes), predicted) << mesh.name << ", " << mode;
    }
  }
  EXPECT_EQ(tp_meshes > 0, family_has_tp_plan() && world().size() % 2 == 0 && world().size() <= 4);
  // Under pipeline stages: each rank's TP collectives are its stages' blocks' (and the root's
  // parts on the end stages).
  for (const Mesh& mesh : pipeline_meshes(world().size())) {
    if (mesh.tp == 1) continue;
    const Config config =
        test_config(with(mesh.keys, {"training.max_steps=1", "training.global_batch=24"}));
    ShardedTrainer t(config, data(), world(), trainer_model(config));
    const StepStats st = t.step(0);
    EXPECT_EQ(double(st.comm.tp_bytes), double(t.traffic().tp_reduced))
        << mesh.name << ", rank " << world().rank();
  }
}

// hpZ (sharding.reshard_after_forward = N): after its forward a block keeps a 1/N slice on each
// rank, and its backward all-gathers from the N ranks of a reshard group instead of the whole
// shard group. The same bytes arrive, so every loss, gradient norm and weight is bitwise that of
// reshard_after_forward = true, in FP32 and BF16, with one micro-batch or three. Where no group
// size applies (N must divide the shard group and lie in 2 .. half of it) it is refused by
// name: at 1-3 ranks every N tried, at 4 ranks N = 3 and N = 4 (and HSDP's shard groups of 2).
TEST(Mesh, ReshardToASmallerGroupComputesTheSameBits) {
  const int W = world().size();
  for (int n : {2, 3, 4}) {
    if (n < W && W % n == 0) continue;
    try {
      const Config config = test_config({"sharding.reshard_after_forward=" + std::to_string(n)});
      ShardedTrainer t(config, data(), world(), trainer_model(config));
      ADD_FAILURE() << "reshard_after_forward = " << n << " accepted at " << W << " ranks";
    } catch (const InputError& e) {
      // Below 4 ranks no group has a divisor to reshard to, and the message says so.
      const std::string want =
          W < 4 ? fmt::format("sharding.reshard_after_forward = {}: a shard group of {} rank", n, W)
                : fmt::format(
                      "sharding.reshard_after_forward = {} must be a divisor of the "
                      "shard group's {} ranks",
                      n, W);
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
  if (W != 4) return;
  for (const char* dtype : {"fp32", "bf16"})
    for (const char* micro : {"1", "3"}) {
      const std::vector<std::string> keys = {"model.n_layer=3", "training.max_steps=4",
                                             "training.global_batch=36",
                                             std::string("training.micro_batches=") + micro,
                                             std::string("precision.param_dtype=") + dtype};
      const std::string what = std::string(dtype) + ", micro-batches " + micro;
      // The trainer keeps a reference to its config.
      const Config base_config = test_config(with(keys, {"sharding.reshard_after_forward=true"}));
      const Config hpz_config = test_config(with(keys, {"sharding.reshard_after_forward=2"}));
      ShardedTrainer base(base_config, data(), world(), make_model(base_config));
      ShardedTrainer hpz(hpz_config, data(), world(), make_model(hpz_config));
      ASSERT_NE(hpz.fsdp().reshard_group(), nullptr);
      EXPECT_EQ(hpz.fsdp().reshard_group()->size(), 2);
      for (int64_t s = 0; s < 4; ++s) {
        const StepStats a = base.step(s), b = hpz.step(s);
        EXPECT_EQ(a.loss, b.loss) << what << " step " << s;
        EXPECT_EQ(a.grad_norm, b.grad_norm) << what << " step " << s;
        EXPECT_EQ(a.comm.gathered_bytes, b.comm.gathered_bytes) << what;  // the same bytes arrive
        EXPECT_EQ(a.comm.regathered_bytes, 0) << what;
        EXPECT_GT(b.comm.regathered_bytes, 0) << what;
        EXPECT_EQ(b.comm.regathered_bytes, hpz.traffic().regathered) << what;
      }
      for (size_t i = 0; i < hpz.model().param_specs().size(); ++i) {
        const Tensor x = base.fsdp().gather_master(i), y = hpz.fsdp().gather_master(i);
        EXPECT_EQ(std::memcmp(x.raw(), y.raw(), size_t(x.nbytes())), 0)
            << what << ": " << hpz.model().param_specs()[i].name;
      }
      // The kept slices are in the budget; the whole units are not.
      EXPECT_GT(hpz.budget().kept_slices, 0) << what;
      EXPECT_EQ(base.budget().kept_slices, 0) << what;
    }
  // HSDP 2x2: a shard group of 2 has no smaller group.
  try {
    const Config config =
        test_config({"sharding.shard_degree=2", "sharding.replicate_degree=2",
                     "sharding.ranks_per_node=2", "sharding.reshard_after_forward=2"});
    ShardedTrainer t(config, data(), world(), trainer_model(config));
    ADD_FAILURE() << "reshard_after_forward = 2 accepted with shard groups of 2";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("a shard group of 2 ranks has no divisor"),
              std::string::npos)
        << e.what();
  }
}

// The InputError message of a trainer made from `keys`, or "" when it was accepted.
std::string refusal(const std::vector<std::string>& keys) {
  try {
    const Config config = test_config(keys);
    ShardedTrainer t(config, data(), world(), trainer_model(config));
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// Replaces each rank's master shards by what a quantized all-gather decodes from them: each
// shard encoded blockwise from its own first element (padding included), decoded to FP32.
void decode_masters_in_place(ShardedTrainer& t, Quantization q) {
  const auto& units = t.fsdp().units();
  std::vector<std::vector<float>> shards(units.size());
  for (size_t u = 0; u < units.size(); ++u) shards[u].assign(size_t(units[u].shard_numel), 0.0f);
  const std::vector<ShardSpan> spans = t.fsdp().spans();
  for (const ShardSpan& s : spans)
    std::memcpy(shards[size_t(s.unit)].data() + s.shard_offset, s.master.raw(), s.master.nbytes());
  for (std::vector<float>& shard : shards) {
    std::vector<uint8_t> code(quantized_bytes(q, int64_t(shard.size())));
    quantize_blocks(q, shard.data(), int64_t(shard.size()), code.data());
    dequantize_blocks(q, code.data(), int64_t(shard.size()), shard.data(), DType::f32);
  }
  for (const ShardSpan& s : spans)
    std::memcpy(s.master.raw(), shards[size_t(s.unit)].data() + s.shard_offset, s.master.nbytes());
}

// A hash of every parameter's whole FP32 master (gathered over the shard group).
int64_t masters_hash(ShardedTrainer& t) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < t.model().param_specs().size(); ++i) {
    const Tensor x = t.fsdp().gather_master(i);
    const auto* b = static_cast<const unsigned char*>(x.raw());
    for (size_t k = 0; k < x.nbytes(); ++k) h = (h ^ b[k]) * 1099511628211ull;
  }
  return int64_t(h >> 2);
}

// sharding.gather_quantization = int8 (qwZ): every all-gather carries blockwise INT8 of the
// FP32 master shards and every rank computes with the decoded values. So a run whose masters
// were replaced by those decoded values beforehand, with plain FP32 gathers, computes the same
// loss and gradient norm bit for bit; the gathers carry about a quarter of FP32's bytes,
// exactly as the traffic prediction counts them. Within one node it is refused by name.
TEST(Mesh, QuantizedGathersComputeWithTheDecodedMasters) {
  const int W = world().size();
  const std::string one_node = refusal(
      {"sharding.ranks_per_node=" + std::to_string(W), "sharding.gather_quantization=int8"});
  EXPECT_NE(one_node.find("sharding.gather_quantization = int8 quantizes all-gathers between "
                          "nodes, but the shard group (" +
                          std::to_string(W) + (W == 1 ? " rank" : " ranks") + ") lies on one node"),
            std::string::npos)
      << one_node;
  if (W == 1) return;
  for (const char* reshard : {"true", "false"}) {
    const std::vector<std::string> keys = {
        "precision.param_dtype=fp32", "training.max_steps=1",
        "sharding.ranks_per_node=" + std::string(W == 4 ? "2" : "1"),
        std::string("sharding.reshard_after_forward=") + reshard};
    const Config plain_config = test_config(keys);
    const Config int8_config = test_config(with(keys, {"sharding.gather_quantization=int8"}));
    ShardedTrainer plain(plain_config, data(), world(), make_model(plain_config));
    ShardedTrainer quantized(int8_config, data(), world(), make_model(int8_config));
    EXPECT_TRUE(quantized.fsdp().quantized().gather);
    decode_masters_in_place(plain, Quantization::int8);
    const StepStats a = plain.step(0), b = quantized.step(0);
    EXPECT_EQ(a.loss, b.loss) << "reshard " << reshard;
    EXPECT_EQ(a.grad_norm, b.grad_norm) << "reshard " << reshard;
    EXPECT_EQ(b.comm.gathered_bytes, quantized.traffic().gathered) << "reshard " << reshard;
    EXPECT_EQ(b.comm.scattered_bytes, quantized.traffic().scattered) << "reshard " << reshard;
    const double ratio = double(b.comm.gathered_bytes) / double(a.comm.gathered_bytes);
    EXPECT_GT(ratio, 0.25) << "reshard " << reshard;  // a byte per FP32 value, and the scales
    EXPECT_LT(ratio, 0.27) << "reshard " << reshard;
  }
}

// sharding.reduce_quantization = int8 | int4 (qgZ): gradients are summed in FP32 within each
// node, then each node's sums cross nodes once, encoded, and are summed in FP32; a replica
// group's all-reduce is an encoded all-to-all and all-gather. Against full-precision
// reductions (FP32) over 4 steps: within INT8's and INT4's rounding (half a step of 1/127 or
// 1/7 of a block's largest value per value, mostly cancelling in sums and norms), the bytes
// those of the prediction, and the replicas' weights bitwise equal (each keeps the decoded
// sums, its own chunk too). Meshes: FSDP with 1 rank per node (no node sum; 1 and 3
// micro-batches) and, at 4 ranks, 2 per node (the node sums of a permuted gradient); HSDP 2x2
// with replicas on 2 nodes (also 3 micro-batches synced once); and a shard group across 2 nodes
// with replicas across nodes too. Within one node: refused.
TEST(Mesh, QuantizedReductionsStayCloseToFullPrecision) {
  const int W = world().size();
  const std::string one_node = refusal(
      {"sharding.ranks_per_node=" + std::to_string(W), "sharding.reduce_quantization=int8"});
  EXPECT_NE(one_node.find("sharding.reduce_quantization = int8 quantizes reductions between "
                          "nodes, but the shard group"),
            std::string::npos)
      << one_node;
  if (W == 1) return;
  const std::string w = std::to_string(W);
  const std::vector<std::string> micro = {"training.micro_batches=3", "training.global_batch=36"};
  std::vector<Mesh> cases = {
      {"FSDP, 1 rank per node", {"sharding.ranks_per_node=1"}, 1},
      {"FSDP, 1 rank per node, 3 micro-batches", with({"sharding.ranks_per_node=1"}, micro), 1}};
  if (W == 4) {
    cases.push_back({"HSDP 2x2, 3 micro-batches, replica_sync last",
                     with({"sharding.shard_degree=2", "sharding.replicate_degree=2",
                           "sharding.ranks_per_node=2", "sharding.replica_sync=last"},
                          micro),
                     2});
    cases.push_back({"FSDP, 2 ranks per node", {"sharding.ranks_per_node=2"}, 1});
    cases.push_back(
        {"HSDP 2x2, a node per replica",
         {"sharding.shard_degree=2", "sharding.replicate_degree=2", "sharding.ranks_per_node=2"},
         2});
    cases.push_back({"HSDP 2x2, 1 rank per node",
                     {"sharding.shard_degree=2", "sharding.replicate_degree=2",
                      "sharding.ranks_per_node=1", "sharding.allow_cross_node_shard=true"},
                     2});
  }
  struct Bound {
    const char* q;
    double loss_rel, norm_rel;
  };
  for (const Mesh& mesh : cases)
    for (const Bound bound : {Bound{"int8", 5e-4, 1e-2}, Bound{"int4", 1.5e-2, 5e-2}}) {
      const std::vector<std::string> keys =
          with(mesh.keys, {"precision.param_dtype=fp32", "training.max_steps=4"});
      const Config plain_config = test_config(keys);
      const Config q_config =
          test_config(with(keys, {std::string("sharding.reduce_quantization=") + bound.q}));
      ShardedTrainer plain(plain_config, data(), world(), make_model(plain_config));
      ShardedTrainer quantized(q_config, data(), world(), make_model(q_config));
      const std::string what = mesh.name + ", " + bound.q;
      double worst_loss = 0, worst_norm = 0;
      for (int64_t s = 0; s < 4; ++s) {
        const StepStats a = plain.step(s), b = quantized.step(s);
        worst_loss = std::max(worst_loss, std::fabs(b.loss - a.loss) / a.loss);
        worst_norm = std::max(worst_norm, std::fabs(b.grad_norm - a.grad_norm) / a.grad_norm);
        EXPECT_NE(a.grad_norm, b.grad_norm) << what;  // quantized: not bitwise the same
        EXPECT_NEAR(b.loss, a.loss, bound.loss_rel * a.loss) << what << " step " << s;
        EXPECT_NEAR(b.grad_norm, a.grad_norm, bound.norm_rel * a.grad_norm)
            << what << " step " << s;
        const Traffic predicted = quantized.traffic();
        EXPECT_EQ(b.comm.gathered_bytes, predicted.gathered) << what;
        EXPECT_EQ(b.comm.scattered_bytes, predicted.scattered) << what;
        EXPECT_EQ(b.comm.replicated_bytes, predicted.replicated) << what;
      }
      if (world().rank() == 0)
        std::printf("  %s: worst relative difference of the loss %.2g, of the gradient norm %.2g\n",
                    what.c_str(), worst_loss, worst_norm);
      if (mesh.replicas > 1) {
        EXPECT_TRUE(quantized.fsdp().quantized().replicas) << what;
        const Tensor h = Tensor::empty("hash", {2}, DType::i64);
        const int64_t mine = masters_hash(quantized);
        h.data<int64_t>()[0] = mine;
        h.data<int64_t>()[1] = -mine;
        world().all_reduce(h, {ReduceOp::max})->wait();
        EXPECT_EQ(h.data<int64_t>()[0], mine) << what << ": replicas differ";
        EXPECT_EQ(h.data<int64_t>()[1], -mine) << what << ": replicas differ";
      }
    }
}

// A checkpoint written under one mesh continues under the next, at another world size:
// FSDP over 4 -> HSDP 2x2 -> FSDP 2 x TP 2 -> TP 2 -> DDP 2 -> FSDP 3 -> TP 4 (at smaller worlds,
// the part of the chain that fits; TP where the family's split fits), and the losses follow one
// uninterrupted unsharded run.
TEST(Mesh, CheckpointsCarryAcrossMeshesAndWorldSizes) {
  const int W = world().size(), rank = world().rank();
  struct Link {
    int ranks;
    std::vector<std::string> keys;
  };
  const auto tp_link = [](int ranks, int tp) {
    return Link{ranks,
                {fmt::format("parallel.tp={}", tp), fmt::format("parallel.dp_shard={}", ranks / tp),
                 "parallel.dp_replicate=1", "parallel.allow_cross_node_tp=true"}};
  };
  std::vector<Link> chain = {{W, {"sharding.shard_degree=" + std::to_string(W)}}};
  if (W >= 4)
    chain.push_back(
        {4,
         {"sharding.shard_degree=2", "sharding.replicate_degree=2", "sharding.ranks_per_node=2"}});
  // Pipeline stages: pipeline rank 0 writes every stage's shards, each loads its own.
  const auto pp_link = [](int ranks, int dp_shard) {
    return Link{ranks,
                {"parallel.pp=2", fmt::format("parallel.dp_shard={}", dp_shard),
                 "parallel.dp_replicate=1", "parallel.tp=1"}};
  };
  if (W >= 4) chain.push_back(pp_link(4, 2));
  if (W >= 4 && tp_fits(2)) chain.push_back(tp_link(4, 2));
  if (W >= 2) chain.push_back(pp_link(2, 1));
  if (W >= 2 && tp_fits(2)) chain.push_back(tp_link(2, 2));
  if (W >= 2) chain.push_back({2, {"sharding.shard_degree=1", "sharding.replicate_degree=2"}});
  if (W >= 3) chain.push_back({3, {"sharding.shard_degree=3"}});
  if (W >= 4 && tp_fits(4)) chain.push_back(tp_link(4, 4));
  ASSERT_GE(chain.size(), 2u) << "a checkpoint carried across no other mesh";
  const std::string dir = testing::shared_dir(world(), "mesh-chain");
  const int64_t per_link = 3, total = per_link * int64_t(chain.size());
  const std::vector<std::string> common = {"precision.param_dtype=fp32",
                                           "training.max_steps=" + std::to_string(total),
                                           "checkpoint.dir=" + dir, "checkpoint.keep=5"};
  const Config reference_config = test_config(common);  // the trainer keeps a reference
  LocalTrainer reference(reference_config, data());
  std::vector<double> want;
  for (int64_t s = 0; s < total; ++s) want.push_back(reference.step(s).loss);
  for (size_t k = 0; k < chain.size(); ++k) {
    auto group = world().split(rank < chain[k].ranks ? 0 : -1, rank);
    if (group) {
      const Config config = test_config(with(common, chain[k].keys));
      ShardedTrainer t(config, data(), *group,
                       make_model(config, tp_slice_of(config, group->rank(), group->size())));
      int64_t start = 0;
      if (k > 0) start = t.load_checkpoint(latest_checkpoint(dir));
      EXPECT_EQ(start, per_link * int64_t(k));
      for (int64_t s = start; s < start + per_link; ++s)
        EXPECT_NEAR(t.step(s).loss, want[size_t(s)], 1e-5 * want[size_t(s)])
            << t.mesh().describe() << " step " << s;
      t.save_checkpoint(start + per_link);
    }
    world().barrier()->wait();
  }
}

}  // namespace
}  // namespace st
