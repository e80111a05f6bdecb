#include <gtest/gtest.h>

#include <cstdlib>

#include "core/error.hpp"
#include "launch/elastic.hpp"

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
  c.sharding.shard_degree = 2;
  c.sharding.replicate_degree = 2;
  // HSDP 2x2 losing a rank: neither degree divides 3, so FSDP over the 3.
  std::string changes = adapt_config_to_restart(c, 3);
  EXPECT_EQ(c.sharding.shard_degree, 3);
  EXPECT_EQ(c.sharding.replicate_degree, 1);
  EXPECT_EQ(c.checkpoint.resume, "auto");
  EXPECT_NE(changes.find("checkpoint.resume = never becomes auto"), std::string::npos) << changes;
  EXPECT_NE(changes.find("shard_degree = 2 x replicate_degree = 2 does not fit 3 ranks: 3 x 1"),
            std::string::npos)
      << changes;
  // Losing a host of two (4 -> 2 ranks): the shard group's size is kept.
  c.sharding.shard_degree = 2;
  c.sharding.replicate_degree = 2;
  adapt_config_to_restart(c, 2);
  EXPECT_EQ(c.sharding.shard_degree, 2);
  EXPECT_EQ(c.sharding.replicate_degree, 1);
  // 8 ranks as 4 shards x 2 replicas losing 2: the replicas' count is kept.
  c.sharding.shard_degree = 4;
  c.sharding.replicate_degree = 2;
  adapt_config_to_restart(c, 6);
  EXPECT_EQ(c.sharding.shard_degree, 3);
  EXPECT_EQ(c.sharding.replicate_degree, 2);
  // A mesh that fits is left alone, and so is the default (-1: the rest).
  c.sharding.shard_degree = -1;
  c.sharding.replicate_degree = 1;
  EXPECT_EQ(adapt_config_to_restart(c, 3), "");
  EXPECT_EQ(c.sharding.shard_degree, -1);
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
