#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <fstream>

#include "launch/config.hpp"
#include "launch/model_factory.hpp"
#include "launch/session.hpp"
#include "launch/sharded_trainer.hpp"
#include "parallel/fsdp/fsdp_runtime.hpp"
#include "tests/temp_dir.hpp"

namespace st {
namespace {

std::string error_of(const std::string& source, const std::vector<std::string>& overrides) {
  try {
    load_config(source, overrides);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Config, BundledConfigsLoad) {
  const Config tiny = load_config("tiny", {});
  EXPECT_EQ(tiny.model.n_layer, 4);
  EXPECT_EQ(tiny.model.n_embd, 256);
  EXPECT_EQ(tiny.training.global_batch, 8);
  EXPECT_EQ(tiny.precision.param_dtype, DType::bf16);
  const Config small = load_config("small", {});
  EXPECT_EQ(small.model.n_layer, 6);
  EXPECT_EQ(small.model.n_embd, 512);
  EXPECT_EQ(small.model.n_head, 8);
  EXPECT_EQ(load_config("", {}).model.n_embd, 256);  // the default job is tiny
}

TEST(Config, OverridesApplyWithTypes) {
  const Config c = load_config(
      "tiny", {"optimizer.lr=0.01", "training.max_steps=7", "precision.param_dtype=fp32",
               "data.path=x.txt", "sharding.reshard_after_forward=false"});
  EXPECT_DOUBLE_EQ(c.schedule.lr, 0.01);
  EXPECT_EQ(c.training.max_steps, 7);
  EXPECT_EQ(c.precision.param_dtype, DType::f32);
  EXPECT_EQ(c.data.path, "x.txt");
  EXPECT_FALSE(c.sharding.reshard_after_forward);
  // reshard_after_forward takes a group size too (hpZ), and true or false clears it again.
  const Config hpz = load_config("tiny", {"sharding.reshard_after_forward=4"});
  EXPECT_TRUE(hpz.sharding.reshard_after_forward);
  EXPECT_EQ(hpz.sharding.reshard_to, 4);
  EXPECT_EQ(load_config("tiny", {"sharding.reshard_after_forward=4",
                                 "sharding.reshard_after_forward=false"})
                .sharding.reshard_to,
            0);
}

TEST(Config, UnknownKeySuggestsClosest) {
  EXPECT_NE(error_of("tiny", {"optimizer.lr_max=1"}).find("did you mean 'optimizer.lr"),
            std::string::npos);
  EXPECT_NE(error_of("tiny", {"training.seqlen=8"}).find("did you mean 'training.seq_len'"),
            std::string::npos);
  EXPECT_NE(error_of("tiny", {"modle.n_head=2"}).find("did you mean 'model.n_head'"),
            std::string::npos);
  EXPECT_EQ(closest_key("zzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"), "");
}

TEST(Config, WrongTypesAndRangesNameTheKey) {
  EXPECT_NE(
      error_of("tiny", {"training.seq_len=abc"}).find("'training.seq_len' must be an integer"),
      std::string::npos);
  EXPECT_NE(error_of("tiny", {"sharding.reshard_after_forward=maybe"})
                .find("'sharding.reshard_after_forward' must be true, false or an integer"),
            std::string::npos);
  EXPECT_NE(error_of("tiny", {"sharding.reshard_after_forward=1"})
                .find("must be true, false, or a group size N >= 2"),
            std::string::npos);
  EXPECT_NE(error_of("tiny", {"optimizer.beta1=1.5"}).find("optimizer.beta1"), std::string::npos);
  EXPECT_NE(error_of("tiny", {"model.n_head=3"})
                .find("model.n_embd = 256 is not divisible by model.n_head = 3"),
            std::string::npos);
  EXPECT_NE(error_of("tiny", {"precision.param_dtype=fp16"}).find("precision.param_dtype: 'fp16'"),
            std::string::npos);
  // fp16 is a floating-point dtype: the message says which ones are accepted instead.
  EXPECT_NE(error_of("tiny", {"precision.param_dtype=fp16"})
                .find("is not a dtype shardtrain stores: the accepted ones are fp32 (f32, "
                      "float32) and bf16 (bfloat16)"),
            std::string::npos);
  EXPECT_NE(error_of("tiny", {"optimizer.name=lamb"}).find("optimizer.name"), std::string::npos);
  EXPECT_NE(error_of("tiny", {"sharding.accumulation=sometimes"}).find("sharding.accumulation"),
            std::string::npos);
}

// hpZ's group size (sharding.reshard_after_forward = N) is refused with the sizes this shard
// group allows, or with its having none (never "between 2 and 2"), and the other options.
TEST(Config, ReshardToNamesTheValidGroupSizes) {
  auto message = [](int n, int shard) {
    try {
      check_reshard_to(n, shard);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message(4, 16), "accepted");
  EXPECT_EQ(message(2, 4), "accepted");
  const std::string options =
      "true (reshards to the whole shard group) or false (keeps whole units)";
  EXPECT_EQ(message(3, 16),
            "sharding.reshard_after_forward = 3 must be a divisor of the shard group's 16 ranks "
            "below 16: 2, 4 or 8 (a smaller group for the backward's all-gathers, e.g. the ranks "
            "of a node); or " +
                options);
  EXPECT_NE(message(3, 4).find("the shard group's 4 ranks below 4: 2 (a smaller"),
            std::string::npos);
  EXPECT_NE(message(16, 16).find("below 16: 2, 4 or 8"), std::string::npos);
  EXPECT_EQ(message(3, 1),
            "sharding.reshard_after_forward = 3: a shard group of 1 rank has no divisor N with 2 "
            "<= N < 1 to reshard to; the options here are " +
                options);
  for (const int shard : {2, 3, 7})
    EXPECT_EQ(message(3, shard),
              fmt::format("sharding.reshard_after_forward = 3: a shard group of {} ranks has no "
                          "divisor N with 2 <= N < {} to reshard to; the options here are {}",
                          shard, shard, options));
}

// The training loop's keys: schedules, validation and the step line's cadence; each bad value
// named with what would be right.
TEST(Config, TrainingLoopKeys) {
  const Config c = load_config("tiny", {"optimizer.schedule=wsd", "optimizer.decay_fraction=0.2",
                                        "optimizer.decay_shape=sqrt", "training.eval_every=50",
                                        "training.eval_tokens=4096", "metrics.log_every=10"});
  EXPECT_EQ(c.schedule.kind, ScheduleKind::wsd);
  EXPECT_DOUBLE_EQ(c.schedule.decay_fraction, 0.2);
  EXPECT_EQ(c.schedule.decay_shape, DecayShape::sqrt);
  EXPECT_EQ(c.training.eval_every, 50);
  EXPECT_EQ(c.training.eval_tokens, 4096);
  EXPECT_EQ(c.metrics.log_every, 10);
  const Config d = load_config("tiny", {});  // today's loop: cosine, final validation, every line
  EXPECT_EQ(d.schedule.kind, ScheduleKind::cosine);
  EXPECT_EQ(d.training.eval_every, 0);
  EXPECT_EQ(d.metrics.log_every, 1);
  const std::pair<const char*, const char*> bad[] = {
      {"optimizer.schedule=step",
       "optimizer.schedule = 'step' must be cosine, linear, constant or wsd"},
      {"optimizer.decay_fraction=0", "optimizer.decay_fraction = 0 must be in (0, 1]"},
      {"optimizer.decay_fraction=1.5", "optimizer.decay_fraction = 1.5 must be in (0, 1]"},
      {"optimizer.decay_shape=exp", "optimizer.decay_shape = 'exp' must be linear, cosine or sqrt"},
      {"training.eval_every=-1", "training.eval_every = -1 must not be negative"},
      {"training.eval_tokens=-5", "training.eval_tokens = -5 must not be negative"},
      {"metrics.log_every=0", "metrics.log_every = 0 must be at least 1"}};
  for (const auto& [item, message] : bad)
    EXPECT_NE(error_of("tiny", {item}).find(message), std::string::npos)
        << item << ": " << error_of("tiny", {item});
}

TEST(Config, ContradictionsNameBothKeys) {
  const std::string precision =
      error_of("tiny", {"precision.param_dtype=fp32", "precision.reduce_dtype=bf16"});
  EXPECT_NE(precision.find("precision.reduce_dtype"), std::string::npos);
  EXPECT_NE(precision.find("precision.param_dtype"), std::string::npos);
  const std::string context = error_of("tiny", {"training.seq_len=300"});
  EXPECT_NE(context.find("training.seq_len"), std::string::npos);
  EXPECT_NE(context.find("model.block_size"), std::string::npos);
  Config c = load_config("tiny", {});
  try {
    validate_for_world(c, 3);
    FAIL() << "8 sequences cannot split over 3 ranks";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("training.global_batch = 8"), std::string::npos);
  }
}

TEST(Config, FileErrorsNameTheFile) {
  const testing::ScopedTempDir tmp;
  const std::string path = tmp.path("typo.toml");
  std::ofstream(path) << "[optimizer]\nlearning_rate = 0.1\n";
  const std::string msg = error_of(path, {});
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("optimizer.learning_rate"), std::string::npos) << msg;
  std::ofstream(path) << "[training]\nmax_steps = \"ten\"\n";
  EXPECT_NE(error_of(path, {}).find("must be an integer"), std::string::npos);
  EXPECT_NE(error_of("/no/such/file.toml", {}).find("/no/such/file.toml"), std::string::npos);
}

// [parallel] sets the mesh; the keys it replaced still read, as the new ones, each noted once.
TEST(Config, ParallelSectionAndRenamedKeys) {
  const Config c = parse_config("[parallel]\ndp_shard = 2\ndp_replicate = 2\n", "p.toml", {});
  EXPECT_EQ(mesh_shape(c, 4), (MeshShape{.dp_shard = 2, .dp_replicate = 2}));
  EXPECT_TRUE(c.renamed_keys.empty());
  const Config old = parse_config("[sharding]\nshard_degree = 2\n", "old.toml",
                                  {"sharding.replicate_degree=3", "sharding.shard_degree=2"});
  EXPECT_EQ(mesh_shape(old, 6), (MeshShape{.dp_shard = 2, .dp_replicate = 3}));
  EXPECT_EQ(old.renamed_keys,
            (std::vector<std::string>{"sharding.shard_degree -> parallel.dp_shard",
                                      "sharding.replicate_degree -> parallel.dp_replicate"}));
  EXPECT_EQ(mesh_shape(load_config("tiny", {"parallel.dp_replicate=-1", "parallel.dp_shard=2"}), 6),
            (MeshShape{.dp_shard = 2, .dp_replicate = 3}));
  auto message = [](const std::vector<std::string>& overrides, int world) {
    try {
      mesh_shape(load_config("tiny", overrides), world);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message({"parallel.tp=-1"}, 4).find("parallel.dp_shard and parallel.tp are both -1"),
            std::string::npos);
  // Tensor parallelism: checked against the family's plan and what it cannot compose with yet.
  EXPECT_EQ(message({"parallel.tp=2"}, 4), "accepted");
  EXPECT_EQ(mesh_shape(load_config("tiny", {"parallel.tp=2"}), 4),
            (MeshShape{.dp_shard = 2, .dp_replicate = 1, .tp = 2}));
  EXPECT_EQ(mesh_shape(load_config("tiny", {"parallel.tp=-1", "parallel.dp_shard=1"}), 4),
            (MeshShape{.dp_shard = 1, .dp_replicate = 1, .tp = 4}));
  EXPECT_EQ(message({"parallel.tp=3"}, 3),
            "parallel.tp = 3 does not divide model.n_head = 4: tensor parallelism splits the "
            "attention heads evenly over the TP ranks (tp = 1, 2, 4 would)");
  // -1 resolved to 3 by the world: the same check once the world is known.
  EXPECT_NE(message({"parallel.tp=-1", "parallel.dp_shard=1"}, 3).find("model.n_head = 4"),
            std::string::npos);
  EXPECT_NE(message({"parallel.tp=8", "model.n_head=8", "model.padded_vocab_size=260"}, 8)
                .find("does not divide model.padded_vocab_size = 260"),
            std::string::npos);
  EXPECT_EQ(message({"parallel.tp=2", "model.family=llama", "model.n_kv_head=2"}, 2), "accepted");
  // Fewer KV heads than ranks are shared when they divide tp, refused when they do not; more
  // must be divisible by tp.
  EXPECT_EQ(message({"parallel.tp=4", "model.family=llama", "model.n_kv_head=2"}, 4), "accepted");
  EXPECT_NE(message({"parallel.tp=4", "model.family=llama", "model.n_head=12", "model.n_embd=48",
                     "model.n_kv_head=3"},
                    4)
                .find("parallel.tp = 4 and model.n_kv_head = 3: with fewer key/value heads"),
            std::string::npos);
  EXPECT_NE(message({"parallel.tp=4", "model.family=llama", "model.n_head=12", "model.n_embd=48",
                     "model.n_kv_head=6"},
                    4)
                .find("parallel.tp = 4 does not divide model.n_kv_head = 6"),
            std::string::npos);
  EXPECT_NE(
      message({"parallel.tp=4", "model.family=qwen3", "model.n_kv_head=4", "model.ffn_hidden=90"},
              4)
          .find("does not divide model.ffn_hidden = 90"),
      std::string::npos);
  // Checkpoints and weights are in whole-parameter coordinates: saved, resumed and read at any
  // TP degree.
  EXPECT_EQ(message({"parallel.tp=2", "checkpoint.dir=/tmp/c", "checkpoint.resume=/tmp/c/step-1",
                     "training.init_from=/tmp/m"},
                    2),
            "accepted");
  // Pipeline parallelism: accepted where the schedule, the blocks and the micro-batches allow.
  EXPECT_EQ(message({"parallel.pp=2", "parallel.dp_shard=1"}, 2), "accepted");
  EXPECT_EQ(message({"parallel.pp=-1", "parallel.dp_shard=2"}, 4), "accepted");
  EXPECT_EQ(message({"parallel.pp=2", "parallel.pp_schedule=interleaved_1f1b",
                     "parallel.pp_virtual_stages=2", "training.micro_batches=4"},
                    4),
            "accepted");
  EXPECT_EQ(message({"parallel.pp=2", "parallel.pp_layers=3,1"}, 2), "accepted");
  const auto refused = [&](std::vector<std::string> overrides, int world, const char* says) {
    EXPECT_NE(message(overrides, world).find(says), std::string::npos)
        << fmt::format("{}", fmt::join(overrides, " ")) << ": " << message(overrides, world);
  };
  refused({"parallel.pp=3"}, 4, "4 ranks are not a multiple of the others' product 3");
  // -1 resolved to 8 stages by the world, for 4 blocks: refused by key, not later.
  refused({"parallel.pp=-1", "parallel.dp_shard=1"}, 8, "every stage needs at least one block");
  refused({"parallel.pp=2", "parallel.pp_virtual_stages=4", "training.micro_batches=2",
           "parallel.pp_schedule=interleaved_1f1b"},
          2, "8 stages, but model.n_layer = 4");
  refused({"parallel.pp=2", "parallel.pp_layers=3,2"}, 2, "parallel.pp_layers = [3, 2] sums past");
  refused({"parallel.pp=2", "parallel.pp_layers=2,1"}, 2, "sums to 3, not model.n_layer = 4");
  refused({"parallel.pp=2", "parallel.pp_layers=4"}, 2, "parallel.pp_layers has 1 entries");
  refused({"parallel.pp=2", "parallel.pp_layers=2,x"}, 2, "\"x\" is not a positive block count");
  refused({"parallel.pp=2", "parallel.pp_schedule=interleaved_1f1b", "parallel.pp_virtual_stages=2",
           "training.micro_batches=3", "training.global_batch=6"},
          2, "training.micro_batches = 3: interleaved_1f1b takes the micro-batches in groups");
  refused({"parallel.pp=2", "parallel.pp_schedule=interleaved_1f1b"}, 2,
          "parallel.pp_virtual_stages = 1: interleaved_1f1b needs at least 2");
  refused({"parallel.pp=2", "parallel.pp_virtual_stages=2"}, 2,
          "the 1f1b schedule runs one stage per rank");
  refused({"parallel.pp_schedule=pipedream"}, 2, "the schedules are gpipe, 1f1b");
  EXPECT_EQ(message({"parallel.pp=2", "parallel.pp_schedule=zero_bubble"}, 2), "accepted");
  refused({"parallel.pp_virtual_stages=2"}, 2, "but parallel.pp = 1");
  EXPECT_EQ(message({"parallel.pp=2", "checkpoint.dir=/tmp/c"}, 2), "accepted");
  EXPECT_EQ(message({"parallel.pp=2", "checkpoint.dir=/tmp/c", "checkpoint.async=true"}, 2),
            "accepted");
  EXPECT_NE(message({"parallel.dp_shard=0"}, 4).find("parallel.dp_shard = 0 must be"),
            std::string::npos);
  EXPECT_EQ(message({"parallel.dp_shard=4", "parallel.tp=1"}, 4), "accepted");
}

// Every key of the run's family: a GPT-2 run leaves out Llama's own keys (six: n_kv_head,
// head_dim, ffn_hidden, rope_theta, norm_eps, tie_embeddings), a Llama run lists all.
TEST(Config, DescribeListsEveryKeyOfTheFamily) {
  ASSERT_EQ(model_family("llama").own_keys.size(), 6u);
  EXPECT_EQ(describe_config(load_config("tiny", {})).size(), config_keys().size() - 6);
  EXPECT_EQ(describe_config(load_config("llama-tiny", {})).size(), config_keys().size());
}

// The Llama keys reach the model: a Llama run's keys build the shape they say, and a Llama
// key under GPT-2 is refused naming it (the command-line tests check the messages).
TEST(Config, LlamaKeysBuildTheirModel) {
  const Config c = load_config(
      "llama-tiny", {"model.n_kv_head=1", "model.ffn_hidden=96", "model.tie_embeddings=false"});
  EXPECT_EQ(c.model.family, "llama");
  const auto model = model_family(c.model.family).build(c.model, DType::f32);
  EXPECT_NE(model->describe().find("Llama L=4 C=256 H=4 KV=1 F=96"), std::string::npos)
      << model->describe();
  EXPECT_EQ(model->param_specs().back().name, "lm_head.weight");
  EXPECT_THROW(load_config("tiny", {"model.rope_theta=500000"}), InputError);
  EXPECT_THROW(load_config("llama-tiny", {"model.norm_eps=0"}), InputError);
  EXPECT_THROW(load_config("llama-tiny", {"model.n_embd=36", "model.n_head=4"}), InputError);
}

}  // namespace
}  // namespace st

namespace st {
namespace {
TEST(Config, CollectiveAlgorithmKey) {
  EXPECT_EQ(
      load_config("tiny", {"sharding.collective_algorithm=shm"}).sharding.collective_algorithm,
      Algorithm::shm);
  EXPECT_THROW(load_config("tiny", {"sharding.collective_algorithm=tree"}), InputError);
}

TEST(Threads, OversubscriptionWarningGivesAdviceThatHelps) {
  EXPECT_EQ(oversubscription_warning(1, 2, 2, true), "");
  EXPECT_EQ(oversubscription_warning(2, 1, 2, false), "");
  // 4 ranks on 2 cores with threads already automatic (1 each): fewer ranks is the only cure.
  EXPECT_EQ(oversubscription_warning(1, 4, 2, true),
            "warning: 1 thread x 4 ranks on this node = 4 threads for 2 cores: they will compete "
            "(run at most 2 ranks per node for full speed)");
  // threads set by hand: automatic threads would split the cores.
  EXPECT_EQ(oversubscription_warning(2, 2, 2, false),
            "warning: 2 threads x 2 ranks on this node = 4 threads for 2 cores: they will "
            "compete (set training.threads = 0 to split the cores)");
}

// The pipeline's memory budget is the most loaded pipeline rank's: its units alone, held for
// the step, and its stages' activations times the micro-batches in flight there (1F1B: P on
// rank 0; GPipe: all M; zero bubble: its deferred weight halves' copies on top).
TEST(Config, PipelineBudgetCountsTheMicroBatchesInFlight) {
  const auto budget = [](std::vector<std::string> keys, int world) {
    keys.insert(keys.end(), {"model.n_layer=4", "training.global_batch=8",
                             "training.micro_batches=8", "training.seq_len=64"});
    const Config c = load_config("tiny", keys);
    const auto model = make_model(c);
    const MeshShape mesh = mesh_shape(c, world);
    return config_memory_budget(
        c, *model, layout_units(model->param_specs(), model->num_units(), mesh.dp_shard), 2, world);
  };
  const MemoryBudget one_rank = budget({}, 1), one_f_one_b = budget({"parallel.pp=2"}, 2),
                     gpipe = budget({"parallel.pp=2", "parallel.pp_schedule=gpipe"}, 2),
                     zero_bubble = budget({"parallel.pp=2", "parallel.pp_schedule=zero_bubble"}, 2);
  // Half the blocks' shards and the root: less than the whole model, more than half of it.
  EXPECT_LT(one_f_one_b.master_and_grad, one_rank.master_and_grad);
  EXPECT_GT(one_f_one_b.master_and_grad, one_rank.master_and_grad / 2);
  // Every unit of the stage gathered, with its FP32 gradient, for the whole step.
  EXPECT_EQ(one_f_one_b.unsharded_grads, 0);  // one rank a stage: in place
  EXPECT_GT(one_f_one_b.unsharded_params, 0);
  // 1F1B holds at most P = 2 micro-batches on a rank, GPipe all M = 8: 4x on rank 0, 8x on
  // rank 1; zero bubble more than 1F1B (its later ranks hold more in flight, and its deferred
  // weight halves hold copies of their operands).
  EXPECT_GE(gpipe.activations, 4 * one_f_one_b.activations);
  EXPECT_GT(zero_bubble.activations, one_f_one_b.activations);
  // Background saves stage a rank's own shards (master and 2 moments): its stages' units.
  const MemoryBudget async_one = budget({"checkpoint.dir=/tmp/c", "checkpoint.async=true"}, 1),
                     async_pp = budget(
                         {"parallel.pp=2", "checkpoint.dir=/tmp/c", "checkpoint.async=true"}, 2);
  EXPECT_EQ(async_one.checkpoint_staging, 3 * one_rank.master_and_grad / 2);
  EXPECT_EQ(async_pp.checkpoint_staging, 3 * one_f_one_b.master_and_grad / 2);
  // Each pipeline rank's budget, the most loaded one's returned.
  std::vector<MemoryBudget> ranks;
  const Config c =
      load_config("tiny", {"model.n_layer=4", "training.global_batch=8", "training.micro_batches=8",
                           "training.seq_len=64", "parallel.pp=2"});
  const auto model = make_model(c);
  const MemoryBudget most = config_memory_budget(
      c, *model, layout_units(model->param_specs(), model->num_units(), 1), 2, 2, &ranks);
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(most.total(), std::max(ranks[0].total(), ranks[1].total()));
}

}  // namespace
}  // namespace st
