#include <gtest/gtest.h>

#include <cstdlib>

#include "core/error.hpp"
#include "launch/elastic.hpp"
#include "parallel/fsdp/fsdp_runtime.hpp"

namespace st {
namespace {

// Sets shardrun's restart variables for one test and clears them after.
struct RestartEnvironment {
  RestartEnvironment(const char* restart, const char* ranks, const char* step, const char* why) {
    ::setenv("SHARDRUN_RESTART", restart, 1);
    ::setenv("SHARDRUN_RESTART_RANKS", ranks, 1);
    ::setenv("SHARDRUN_RESTART_STEP", step, 1);
    ::setenv("SHARDRUN_RESTART_REASON", why, 1);
  }
  ~RestartEnvironment() {
    for (const char* v : {"SHARDRUN_RESTART", "SHARDRUN_RESTART_RANKS", "SHARDRUN_RESTART_STEP",
                          "SHARDRUN_RESTART_REASON"})
      ::unsetenv(v);
  }
};

std::string notice_error() {
  try {
    restart_notice_from_environment();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Elastic, NoVariableMeansNoRestart) {
  ::unsetenv("SHARDRUN_RESTART");
  EXPECT_FALSE(restart_notice_from_environment());
}

TEST(Elastic, TheNoticeIsReadAndEveryNumberChecked) {
  {
    RestartEnvironment env("2/3", "4", "12", "rank 1 on vm exited on signal 9 (Killed)");
    const auto n = restart_notice_from_environment();
    ASSERT_TRUE(n);
    EXPECT_EQ(n->number, 2);
    EXPECT_EQ(n->limit, 3);
    EXPECT_EQ(n->ranks_before, 4);
    EXPECT_EQ(n->failed_after_step, 12);
    EXPECT_EQ(n->reason, "rank 1 on vm exited on signal 9 (Killed)");
  }
  {
    RestartEnvironment env("4/3", "4", "12", "x");
    EXPECT_NE(notice_error().find("SHARDRUN_RESTART = '4/3' must be K/N with 1 <= K <= N"),
              std::string::npos);
  }
  {
    RestartEnvironment env("1/3", "four", "12", "x");
    EXPECT_NE(notice_error().find("SHARDRUN_RESTART_RANKS = 'four' must be a whole number"),
              std::string::npos);
  }
  {
    RestartEnvironment env("1/3", "4", "-1", "x");
    EXPECT_NE(notice_error().find("SHARDRUN_RESTART_STEP = '-1'"), std::string::npos);
  }
  {
    RestartEnvironment env("1", "4", "1", "x");
    EXPECT_NE(notice_error().find("must be K/N"), std::string::npos);
  }
}

TEST(Elastic, InjectedKillsNameTheirRankAndStep) {
  ::setenv("SHARDRUN_FAULT_KILL", "1@12,3@4,1@20", 1);
  EXPECT_EQ(injected_kills_from_environment(1), (std::vector<int64_t>{12, 20}));
  EXPECT_EQ(injected_kills_from_environment(3), (std::vector<int64_t>{4}));
  EXPECT_TRUE(injected_kills_from_environment(0).empty());
  ::setenv("SHARDRUN_FAULT_KILL", "1:12", 1);
  try {
    injected_kills_from_environment(1);
    ADD_FAILURE() << "a malformed SHARDRUN_FAULT_KILL was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("SHARDRUN_FAULT_KILL = '1:12' must be RANK@STEP"),
              std::string::npos)
        << e.what();
  }
  ::unsetenv("SHARDRUN_FAULT_KILL");
  EXPECT_TRUE(injected_kills_from_environment(1).empty());
}

TEST(Elastic, AMeshThatNoLongerFitsFallsBackToTheNearestValidOne) {
  Config c;
  c.checkpoint.dir = "ck";
  c.checkpoint.resume = "never";
  c.parallel.dp_shard = 2;
  c.parallel.dp_replicate = 2;
  // HSDP 2x2 losing a rank: neither degree divides 3, so FSDP over the 3.
  std::string changes = adapt_config_to_restart(c, 3);
  EXPECT_EQ(c.parallel.dp_shard, 3);
  EXPECT_EQ(c.parallel.dp_replicate, 1);
  EXPECT_EQ(c.checkpoint.resume, "auto");
  EXPECT_NE(changes.find("checkpoint.resume = never becomes auto"), std::string::npos) << changes;
  EXPECT_NE(changes.find("dp_shard = 2 x dp_replicate = 2 does not fit 3 ranks: 3 x 1"),
            std::string::npos)
      << changes;
  // Losing a host of two (4 -> 2 ranks): the shard group's size is kept.
  c.parallel.dp_shard = 2;
  c.parallel.dp_replicate = 2;
  adapt_config_to_restart(c, 2);
  EXPECT_EQ(c.parallel.dp_shard, 2);
  EXPECT_EQ(c.parallel.dp_replicate, 1);
  // 8 ranks as 4 shards x 2 replicas losing 2: the replicas' count is kept.
  c.parallel.dp_shard = 4;
  c.parallel.dp_replicate = 2;
  adapt_config_to_restart(c, 6);
  EXPECT_EQ(c.parallel.dp_shard, 3);
  EXPECT_EQ(c.parallel.dp_replicate, 2);
  // A mesh that fits is left alone, and so is the default (-1: the rest).
  c.parallel.dp_shard = -1;
  c.parallel.dp_replicate = 1;
  EXPECT_EQ(adapt_config_to_restart(c, 3), "");
  EXPECT_EQ(c.parallel.dp_shard, -1);
  // A pipeline keeps its stages: PP 2 x FSDP 4 losing 2 of 8 ranks is PP 2 x FSDP 3; an odd
  // world fits no mesh with 2 stages.
  c.parallel.pp = 2;
  c.parallel.dp_shard = 4;
  adapt_config_to_restart(c, 6);
  EXPECT_EQ(c.parallel.pp, 2);
  EXPECT_EQ(c.parallel.dp_shard, 3);
  EXPECT_EQ(mesh_shape(c, 6), (MeshShape{.dp_shard = 3, .dp_replicate = 1, .tp = 1, .pp = 2}));
  c.parallel.dp_shard = 4;
  EXPECT_THROW(adapt_config_to_restart(c, 5), InputError);
}

// Every option that constrains the mesh: a restart on a mesh where it cannot apply drops it
// and names it, so the restarted job never refuses its own config.
TEST(Elastic, ARestartDropsOptionsTheNewMeshCannotApply) {
  Config c;
  c.sharding.ranks_per_node = 2;
  c.sharding.gather_quantization = Quantization::int8;
  c.sharding.reduce_quantization = Quantization::int8;
  // 4 ranks on two pretend nodes lose one: 2 ranks, one node, nothing to quantize.
  Config two = c;
  std::string changes = adapt_config_to_restart(two, 2);
  EXPECT_EQ(two.sharding.gather_quantization, Quantization::none);
  EXPECT_EQ(two.sharding.reduce_quantization, Quantization::none);
  EXPECT_NE(changes.find("gather_quantization = int8, reduce_quantization = int8 have no link "
                         "between nodes to quantize on 2 ranks: none"),
            std::string::npos)
      << changes;
  EXPECT_NO_THROW(validate_for_world(two, 2));
  // Still two nodes at 4 of 6 ranks: kept, nothing said.
  Config four = c;
  EXPECT_EQ(adapt_config_to_restart(four, 4), "");
  EXPECT_EQ(four.sharding.gather_quantization, Quantization::int8);
  // Detected nodes (a lost host): judged on each rank's node; unknown nodes are not judged.
  Config hosts = c;
  hosts.sharding.ranks_per_node = 0;
  hosts.sharding.gather_quantization = Quantization::none;
  adapt_config_to_restart(hosts, 2, {0, 0});
  EXPECT_EQ(hosts.sharding.reduce_quantization, Quantization::none);
  hosts.sharding.reduce_quantization = Quantization::int8;
  adapt_config_to_restart(hosts, 2, {0, 1});
  EXPECT_EQ(hosts.sharding.reduce_quantization, Quantization::int8);
  adapt_config_to_restart(hosts, 2);
  EXPECT_EQ(hosts.sharding.reduce_quantization, Quantization::int8);
  // HSDP 2 x 2 on nodes of 2: the replicas span nodes, so reduce quantization still applies
  // to them after losing nothing; on 2 ranks (one node) it goes.
  Config hsdp = c;
  hsdp.sharding.gather_quantization = Quantization::none;
  hsdp.parallel.dp_shard = 2;
  hsdp.parallel.dp_replicate = 2;
  EXPECT_EQ(adapt_config_to_restart(hsdp, 4), "");
  adapt_config_to_restart(hsdp, 2);
  EXPECT_EQ(hsdp.sharding.reduce_quantization, Quantization::none);
  // hpZ: reshard_after_forward = 4 on 8 ranks, restarted on 6 (4 does not divide 6): true.
  Config hpz;
  hpz.sharding.reshard_to = 4;
  changes = adapt_config_to_restart(hpz, 6);
  EXPECT_EQ(hpz.sharding.reshard_to, 0);
  EXPECT_TRUE(hpz.sharding.reshard_after_forward);
  EXPECT_NE(changes.find("reshard_after_forward = 4 does not divide a shard group of 6: true"),
            std::string::npos)
      << changes;
  hpz.sharding.reshard_to = 2;
  EXPECT_EQ(adapt_config_to_restart(hpz, 6), "");
  EXPECT_EQ(hpz.sharding.reshard_to, 2);
}

// The sizes a job can restart at count every option: with the options above dropped where
// they cannot apply, only the batch decides (8 sequences: 1, 2, 4, 8 of 8 ranks).
TEST(Elastic, RunnableWorldSizesHoldWithConstrainingOptions) {
  Config c;
  c.training.global_batch = 8;
  c.sharding.ranks_per_node = 2;
  c.sharding.gather_quantization = Quantization::int8;
  c.sharding.reduce_quantization = Quantization::int8;
  c.sharding.reshard_to = 2;
  const RunnableWorldSizes sizes = runnable_world_sizes(c, 8);
  EXPECT_EQ(sizes.runnable, (std::vector<int>{1, 2, 4, 8}));
  for (int w : sizes.runnable) {
    Config r = c;
    adapt_config_to_restart(r, w);
    EXPECT_NO_THROW(validate_for_world(r, w)) << w;
    const MeshShape shape = mesh_shape(r, w);
    if (r.sharding.reshard_to) {
      EXPECT_NO_THROW(check_reshard_to(int(r.sharding.reshard_to), shape.dp_shard)) << w;
    }
  }
}

TEST(Elastic, TheRestartLineSaysWhyFromWhereAndOnWhat) {
  RestartNotice n{1, 3, 4, 12, "rank 1 on vm exited on signal 9 (Killed)"};
  EXPECT_EQ(restart_line(n, "ck/step-00000010", 10, 3, "FSDP over 3 ranks", ""),
            "restart 1 of 3 | why: rank 1 on vm exited on signal 9 (Killed) | from "
            "ck/step-00000010 (step 10); 2 steps recomputed | 3 ranks (was 4), FSDP over 3 ranks");
  EXPECT_NE(restart_line(n, "", 0, 4, "FSDP over 4 ranks", "").find("no checkpoint: from step 0"),
            std::string::npos);
}

TEST(Elastic, AResumedMetricsFileKeepsTheStepsBeforeTheCheckpoint) {
  const std::string earlier =
      "{\"step\":0,\"loss\":5.5}\n{\"step\":9,\"loss\":4.0}\n{\"step\":10,\"loss\":3.7}\n"
      "{\"step\":11,\"loss\":3.6}\nnot json\n[1,2]\n{\"after_step\":5,\"restart\":1}\n"
      "{\"after_step\":12,\"val_loss\":3.0}\n";
  const std::vector<std::string> kept = metrics_lines_to_keep(earlier, 10);
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept[0], "{\"step\":0,\"loss\":5.5}");
  EXPECT_EQ(kept[1], "{\"step\":9,\"loss\":4.0}");
  EXPECT_EQ(kept[2], "{\"after_step\":5,\"restart\":1}");
  EXPECT_TRUE(metrics_lines_to_keep(earlier, 0).empty());
}

}  // namespace
}  // namespace st
