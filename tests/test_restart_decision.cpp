// shardrun's restart decisions (launch/restart_decision) from the ranks' failure records
// (core/failure_record): the cause is the oldest record; what no restart can fix is not
// restarted; "the same failure twice" is the same class, errno and step whatever the wording.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "core/error.hpp"
#include "core/failure_record.hpp"
#include "launch/config.hpp"
#include "launch/elastic.hpp"
#include "launch/restart_decision.hpp"
#include "tests/temp_dir.hpp"

namespace st {
namespace {

RunFailure failure(FailureClass kind, int error, int64_t steps, std::string why,
                   int exit_code = 1) {
  return {exit_code, kind, error, steps, std::move(why)};
}

RestartLimits limits(int attempt, int max_restarts = 3, int available = 4, int min_ranks = 1) {
  RestartLimits l;
  l.attempt = attempt;
  l.max_restarts = max_restarts;
  l.available = available;
  l.min_ranks = min_ranks;
  return l;
}

TEST(RestartDecision, WhatNoRestartCanFixIsNotRestarted) {
  auto d =
      decide_restart(failure(FailureClass::bad_input, 0, 0, "rank 0: error: x", 2), {}, limits(0));
  EXPECT_FALSE(d.restart);
  EXPECT_EQ(d.message,
            "shardrun: not restarting: the job refused its input (exit 2), which no restart can "
            "fix");
  // A full disk, whichever file and step it surfaced at: the first time, not after two runs.
  d = decide_restart(failure(FailureClass::io, ENOSPC, 7,
                             "rank 1: failed: writing 'ck/exp_avg': No space left on device"),
                     {}, limits(0));
  EXPECT_FALSE(d.restart);
  EXPECT_NE(d.message.find("No space left on device (free space first) fails again on a "
                           "restart; the failure, after step 7: rank 1: failed: writing"),
            std::string::npos)
      << d.message;
  d = decide_restart(failure(FailureClass::io, EACCES, 3, "rank 0: failed: cannot open"), {},
                     limits(0));
  EXPECT_FALSE(d.restart);
  EXPECT_NE(d.message.find("Permission denied (fix the permission first)"), std::string::npos);
  // An I/O error of the moment (EIO) is restarted.
  EXPECT_TRUE(decide_restart(failure(FailureClass::io, EIO, 3, "x"), {}, limits(0)).restart);
}

TEST(RestartDecision, TheSameFailureTwiceComparesClassErrnoAndStepNotWording) {
  const auto before = failure(FailureClass::non_finite, 0, 1, "rank 0: failed: loss is nan at 1");
  const auto now = failure(FailureClass::non_finite, 0, 1, "rank 0: failed: norm is inf (PID 7)");
  auto d = decide_restart(now, before, limits(1));
  EXPECT_FALSE(d.restart);
  EXPECT_EQ(d.message,
            "shardrun: not restarting: the job failed the same way after step 1 twice:\n"
            "  run 1: rank 0: failed: loss is nan at 1\n"
            "  run 2: rank 0: failed: norm is inf (PID 7)");
  // Another step, another class or another errno is another failure.
  EXPECT_TRUE(
      decide_restart(failure(FailureClass::non_finite, 0, 2, "x"), before, limits(1)).restart);
  EXPECT_TRUE(
      decide_restart(failure(FailureClass::lost_rank, 0, 1, "x"), before, limits(1)).restart);
  EXPECT_TRUE(decide_restart(failure(FailureClass::io, EIO, 5, "x"),
                             failure(FailureClass::io, ETIMEDOUT, 5, "x"), limits(1))
                  .restart);
}

TEST(RestartDecision, RestartsUsedAndRanksLeft) {
  const auto lost =
      failure(FailureClass::lost_rank, 0, 3, "rank 1 on vm exited on signal 9 (Killed)");
  auto d = decide_restart(lost, {}, limits(2, 2));
  EXPECT_FALSE(d.restart);
  EXPECT_EQ(d.message,
            "shardrun: not restarting: the 2 restart(s) of --max-restarts are used; the last "
            "failure, after step 3: rank 1 on vm exited on signal 9 (Killed)");
  d = decide_restart(lost, {}, limits(0, 2, 1, 2));
  EXPECT_FALSE(d.restart);
  EXPECT_EQ(d.message,
            "shardrun: not restarting: 1 rank(s) remain, fewer than --min-ranks 2; the failure, "
            "after step 3: rank 1 on vm exited on signal 9 (Killed)");
  EXPECT_TRUE(decide_restart(lost, {}, limits(0, 2, 2, 2)).restart);
}

void write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

TEST(RestartDecision, TheLargestWorldSizeTheJobRunsAt) {
  const auto lost = failure(FailureClass::lost_rank, 0, 12, "rank 1 on vm exited on signal 9");
  RestartLimits l = limits(0, 2, 3);
  // No sizes written (the job failed before it could): every rank that remains.
  auto d = decide_restart(lost, {}, l);
  EXPECT_TRUE(d.restart);
  EXPECT_EQ(d.world, 3);
  EXPECT_EQ(d.note, "");
  l.runnable = {1, 2, 4};
  l.refused_why = {{3, "training.global_batch = 8 cannot be split evenly over 3 rank(s)"}};
  d = decide_restart(lost, {}, l);
  EXPECT_TRUE(d.restart);
  EXPECT_EQ(d.world, 2);
  EXPECT_EQ(d.note,
            "shardrun: 3 ranks remain, but this job cannot run at 3 (training.global_batch = 8 "
            "cannot be split evenly over 3 rank(s)): the restart runs at 2, the largest world "
            "size it can");
  l.available = 4;
  d = decide_restart(lost, {}, l);
  EXPECT_EQ(d.world, 4);
  EXPECT_EQ(d.note, "");
  // Never below --min-ranks: then no restart, saying why.
  l.available = 3;
  l.min_ranks = 3;
  d = decide_restart(lost, {}, l);
  EXPECT_FALSE(d.restart);
  EXPECT_EQ(d.message,
            "shardrun: not restarting: 3 rank(s) remain, this job cannot run at 3 "
            "(training.global_batch = 8 cannot be split evenly over 3 rank(s)), and no world "
            "size from --min-ranks 3 to 3 can run it; the failure, after step 12: rank 1 on vm "
            "exited on signal 9");
}

TEST(RestartDecision, TheJobWritesTheWorldSizesItRunsAt) {
  // tiny's global batch of 8 splits over 1, 2, 4 and 8 ranks; an HSDP mesh is fitted first.
  const Config config =
      load_config("tiny", {"sharding.shard_degree=2", "sharding.replicate_degree=4"});
  const RunnableWorldSizes sizes = runnable_world_sizes(config, 8);
  EXPECT_EQ(sizes.runnable, (std::vector<int>{1, 2, 4, 8}));
  ASSERT_EQ(sizes.refused_why.count(3), 1u);
  EXPECT_NE(sizes.refused_why.at(3).find("training.global_batch = 8 cannot be split evenly over "
                                         "3 rank(s)"),
            std::string::npos);
  testing::ScopedTempDir dir;
  write(dir.path("sizes"), runnable_world_sizes_json(sizes));
  RestartLimits l;
  read_runnable_world_sizes(dir.path("sizes"), l);
  EXPECT_EQ(l.runnable, sizes.runnable);
  EXPECT_EQ(l.refused_why, sizes.refused_why);
  // No file: nothing known; a damaged one is refused naming it.
  RestartLimits none;
  read_runnable_world_sizes(dir.path("absent"), none);
  EXPECT_TRUE(none.runnable.empty());
  write(dir.path("bad"), R"({"world_size": 4, "runnable": [1, 9], "refused": {}})");
  EXPECT_THROW(read_runnable_world_sizes(dir.path("bad"), none), InputError);
  write(dir.path("bad2"), R"({"world_size": 4, "runnable": [2, 1], "refused": {}})");
  EXPECT_THROW(read_runnable_world_sizes(dir.path("bad2"), none), InputError);
}

TEST(RestartDecision, TheOldestRecordIsTheCauseElseTheOutputSays) {
  testing::ScopedTempDir dir;
  const std::string records = dir.path("failures");
  std::filesystem::create_directories(records);
  FailureRecord late{1, "h1", 8, FailureClass::other, 0, "failed: ... No such file", 200.0};
  FailureRecord first{0,    "h0", 7, FailureClass::io, ENOSPC, "failed: No space left on device",
                      100.0};
  write(records + "/rank-1.json", failure_record_json(late).dump());
  write(records + "/rank-0.json", failure_record_json(first).dump());
  write(records + "/rank-2.json", "{\"rank\": 2, \"trunc");  // killed while writing: skipped
  write(dir.path("log"), "step     9/10 | loss 1\n");
  RunFailure f = run_failure(1, records, dir.path("log"));
  EXPECT_EQ(f.kind, FailureClass::io);
  EXPECT_EQ(f.error, ENOSPC);
  EXPECT_EQ(f.steps_done, 7);  // the record's, not the output's (a --json job prints none)
  EXPECT_EQ(f.why, "rank 0: failed: No space left on device");
  // A cut-off host's rank blames the others in a record the launcher never heard: the record
  // whose message reached the output is the cause.
  FailureRecord cut_off{2, "host1", 10, FailureClass::lost_rank, 0, "rank 1 on host0 stopped", 50};
  FailureRecord heard{0, "host0", 10, FailureClass::lost_rank, 0, "rank 3 on host1 stopped", 60};
  std::filesystem::remove_all(records);
  std::filesystem::create_directories(records);
  write(records + "/rank-2.json", failure_record_json(cut_off).dump());
  write(records + "/rank-0.json", failure_record_json(heard).dump());
  write(dir.path("log3"), "shardtrain: rank 0: rank 3 on host1 stopped\n");
  EXPECT_EQ(run_failure(1, records, dir.path("log3")).why, "rank 0: rank 3 on host1 stopped");
  EXPECT_EQ(run_failure(1, records, dir.path("log")).why, "rank 2: rank 1 on host0 stopped");
  // No record (a rank killed): mpirun's note of the death, a lost rank; the last step printed.
  write(dir.path("log2"),
        "step     2/10 | loss 1\nstep     3/10 | loss 1\nshardtrain: terminated at step 3\n"
        "shardtrain: stopped by mpirun (SIGTERM) in step 4 of 10; newest complete checkpoint: c\n"
        "mpirun noticed that process rank 1 with PID 4242 on node vm exited on signal 9 "
        "(Killed).\n");
  f = run_failure(1, dir.path("none"), dir.path("log2"));
  EXPECT_EQ(f.kind, FailureClass::lost_rank);
  EXPECT_EQ(f.steps_done, 3);
  EXPECT_EQ(f.why, "rank 1 on vm exited on signal 9 (Killed)");
  // And a run's line survives the trip through shardrun's state folder.
  const RunFailure back = run_failure_from_line(run_failure_line(f), "line");
  EXPECT_EQ(back.kind, f.kind);
  EXPECT_EQ(back.steps_done, f.steps_done);
  EXPECT_EQ(back.why, f.why);
}

// restart-decision as shardrun calls it, the files in `dir`: an empty failures folder, a log,
// no previous run, this run's line to `save`.
RestartDecisionOptions decision_options(const testing::ScopedTempDir& dir) {
  std::filesystem::create_directories(dir.path("failures"));
  write(dir.path("log"), "step     3/10 | loss 1\n");
  RestartDecisionOptions o;
  o.exit_code = 137;
  o.failures = dir.path("failures");
  o.log = dir.path("log");
  o.previous = dir.path("previous");
  o.save = dir.path("save");
  o.world_sizes = dir.path("sizes");
  o.limits = limits(0);
  return o;
}

// The InputError's message of run_restart_decision(o), "" when it throws none.
std::string refusal(const RestartDecisionOptions& o) {
  try {
    ::testing::internal::CaptureStdout();
    ::testing::internal::CaptureStderr();
    run_restart_decision(o);
  } catch (const InputError& e) {
    const std::string out = ::testing::internal::GetCapturedStdout();
    ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(out, "") << "no decision printed when refusing";
    return e.what();
  }
  ::testing::internal::GetCapturedStdout();
  ::testing::internal::GetCapturedStderr();
  return "";
}

TEST(RestartDecision, FifosAreRefusedNotWaitedOn) {
  testing::ScopedTempDir dir;
  RestartDecisionOptions o = decision_options(dir);
  EXPECT_EQ(refusal(o), "");
  // Each flag's FIFO, and a record that is one: opened, it would wait for a writer forever.
  for (const char* flag : {"--log", "--previous", "--world-sizes", "--failures"}) {
    RestartDecisionOptions f = decision_options(dir);
    const std::string fifo = dir.path(std::string("fifo") + flag);
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    std::string named = fifo;
    if (std::string(flag) == "--log") f.log = fifo;
    if (std::string(flag) == "--previous") f.previous = fifo;
    if (std::string(flag) == "--world-sizes") f.world_sizes = fifo;
    if (std::string(flag) == "--failures") {
      named = f.failures + "/rank-1.json";
      ASSERT_EQ(::mkfifo(named.c_str(), 0600), 0);
    }
    const std::string why = refusal(f);
    EXPECT_NE(why.find(flag), std::string::npos) << why;
    EXPECT_NE(why.find("'" + named + "' is a FIFO; "), std::string::npos) << why;
    std::filesystem::remove(named);
  }
}

TEST(RestartDecision, AnUnwritableSaveIsRefused) {
  testing::ScopedTempDir dir;
  RestartDecisionOptions o = decision_options(dir);
  // Without this run's line the next failure is never compared with it.
  o.save = dir.path("no-such-folder/save");
  EXPECT_EQ(refusal(o), "restart-decision: --save '" + o.save +
                            "' cannot be written: No such file or directory");
  o.save = "/dev/full";  // a device: not a place to keep a line
  EXPECT_EQ(refusal(o),
            "restart-decision: --save '/dev/full' is a character device; it must be "
            "a regular file");
  o.save = dir.path("save");
  EXPECT_EQ(refusal(o), "");
  std::ifstream in(o.save);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_EQ(run_failure_from_line(line, "save").steps_done, 3);
}

TEST(RestartDecision, FlagsAndCountsOutOfRangeAreRefusedByName) {
  testing::ScopedTempDir dir;
  RestartDecisionOptions o = decision_options(dir);
  o.exit_code = 0;  // a run that succeeded is no failure to restart
  EXPECT_EQ(refusal(o),
            "restart-decision: --exit-code = 0 must be in [1, 255] (a failed run's exit code; 0 "
            "is a success)");
  o = decision_options(dir);
  o.limits.attempt = -1;
  EXPECT_NE(refusal(o).find("--attempt = -1 must be in [0, 1000]"), std::string::npos);
  o = decision_options(dir);
  o.limits.max_restarts = -3;
  EXPECT_NE(refusal(o).find("--max-restarts = -3 must be in [0, 1000]"), std::string::npos);
  o = decision_options(dir);
  o.limits.available = -2;
  EXPECT_NE(refusal(o).find("--available = -2 must be in [0, 65536]"), std::string::npos);
  o = decision_options(dir);
  o.limits.min_ranks = 0;
  EXPECT_NE(refusal(o).find("--min-ranks = 0 must be in [1, 65536]"), std::string::npos);
  // steps_done beyond any run: in the previous run's line, a rank's record, the log.
  o = decision_options(dir);
  RunFailure huge = failure(FailureClass::other, 0, INT64_MAX, "x");
  write(o.previous, run_failure_line(huge) + "\n");
  EXPECT_NE(refusal(o).find("--previous '" + o.previous + "': steps_done"), std::string::npos)
      << refusal(o);
  std::filesystem::remove(o.previous);
  FailureRecord record{1, "h1", INT64_MAX, FailureClass::other, 0, "failed: x", 1.0};
  write(o.failures + "/rank-1.json", failure_record_json(record).dump());
  EXPECT_EQ(refusal(o), "restart-decision: --failures '" + o.failures +
                            "': rank 1's record: steps_done = 9223372036854775807 must be in "
                            "[0, 1000000000000]");
  std::filesystem::remove(o.failures + "/rank-1.json");
  write(o.log, "step 99999999999999999999/10 | loss 1\n");
  EXPECT_EQ(refusal(o), "restart-decision: --log '" + o.log +
                            "' line 1: steps_done = 99999999999999999999 must be in [0, "
                            "1000000000000]");
  // Nothing was saved by the refusals.
  EXPECT_FALSE(std::filesystem::exists(o.save));
}

TEST(FailureRecord, ClassesOfCaughtFailures) {
  int error = -1;
  EXPECT_EQ(classify_failure(IoError("w", ENOSPC), error), FailureClass::io);
  EXPECT_EQ(error, ENOSPC);
  EXPECT_EQ(classify_failure(std::filesystem::filesystem_error(
                                 "rename", std::make_error_code(std::errc::read_only_file_system)),
                             error),
            FailureClass::io);
  EXPECT_EQ(error, EROFS);
  EXPECT_EQ(classify_failure(InputError("x"), error), FailureClass::bad_input);
  EXPECT_EQ(classify_failure(AgreedError("nan"), error), FailureClass::non_finite);
  EXPECT_EQ(classify_failure(std::runtime_error("x"), error), FailureClass::other);
  EXPECT_EQ(error, 0);
}

TEST(FailureRecord, WrittenOncePerRankWhereShardrunSays) {
  testing::ScopedTempDir dir;
  set_failure_record_folder(dir.dir());
  record_failure(FailureClass::timeout, 0, "watchdog: ...", 3);
  record_failure(FailureClass::other, 0, "a later failure of the same rank", 3);
  set_failure_record_folder("");
  record_failure(FailureClass::other, 0, "nowhere to go", 4);
  const auto records = read_failure_records(dir.dir());
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].rank, 3);
  EXPECT_EQ(records[0].kind, FailureClass::timeout);
  EXPECT_EQ(records[0].message, "watchdog: ...");
  EXPECT_FALSE(records[0].host.empty());
}

}  // namespace
}  // namespace st
