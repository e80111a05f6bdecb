// The heartbeat's verdict on the rank it watches, from hand-made beats: silence for the timeout
// is a stopped rank; no progress outside any wait while this rank waits is a stuck one; slow
// ranks, waiting ranks and ranks never heard from are left alone.
#include <gtest/gtest.h>

#include "collectives/heartbeat.hpp"
#include "core/liveness.hpp"

namespace st {
namespace {

constexpr double kTimeout = 10;

PeerBeat heard_at(double t, bool waiting, int64_t step = 4) {
  PeerBeat b;
  b.heard = true;
  b.last_heard_s = t;
  b.progress_at_s = t;
  b.state.step = step;
  b.state.waiting = waiting;
  return b;
}

liveness::Snapshot self_waiting_since(double t) {
  liveness::Snapshot s;
  s.waiting = true;
  s.waiting_since_s = t;
  return s;
}

TEST(Heartbeat, SilenceLongerThanTheTimeoutIsAStoppedRank) {
  const PeerBeat b = heard_at(100, true);
  EXPECT_FALSE(judge_peer(1, b, {}, 100 + kTimeout - 0.1, kTimeout));
  const auto verdict = judge_peer(1, b, {}, 100 + kTimeout + 0.1, kTimeout);
  ASSERT_TRUE(verdict);
  EXPECT_NE(verdict->find("rank 1 stopped responding at step 5: no heartbeat for 10.1 s"),
            std::string::npos)
      << *verdict;
}

TEST(Heartbeat, ASilentRankOnAnotherHostIsNamedWithItsHost) {
  const auto verdict =
      judge_peer(3, heard_at(100, true), {}, 100 + kTimeout + 0.1, kTimeout, "host1");
  ASSERT_TRUE(verdict);
  EXPECT_NE(verdict->find("rank 3 on host1 stopped responding at step 5"), std::string::npos)
      << *verdict;
  EXPECT_NE(verdict->find("unreachable: host1's link or network"), std::string::npos) << *verdict;
}

TEST(Heartbeat, NoProgressOutsideAWaitWhileOthersWaitIsAStuckRank) {
  PeerBeat b = heard_at(200, false);
  b.progress_at_s = 100;  // beats keep coming, the main thread does not move
  const auto verdict = judge_peer(3, b, self_waiting_since(150), 200, kTimeout);
  ASSERT_TRUE(verdict);
  EXPECT_NE(verdict->find("rank 3 is stuck at step 5: no progress for 100.0 s outside any "
                          "collective"),
            std::string::npos)
      << *verdict;
}

// A rank stopped in the middle of a long compute stretch: its last progress is older than its
// last beat. It is a stopped rank once its silence reaches the timeout, never "stuck" before
// that (cli.stopped_rank_ends_the_job saw "stuck" under AddressSanitizer, whose steps are long).
TEST(Heartbeat, ASilentRankIsStoppedNotStuckWhateverItsLastProgress) {
  PeerBeat b = heard_at(100, false);
  b.progress_at_s = 99;  // computing since 99, stopped at 100
  EXPECT_FALSE(judge_peer(1, b, self_waiting_since(99), 100 + kTimeout - 0.5, kTimeout));
  const auto verdict = judge_peer(1, b, self_waiting_since(99), 100 + kTimeout + 0.1, kTimeout);
  ASSERT_TRUE(verdict);
  EXPECT_NE(verdict->find("rank 1 stopped responding"), std::string::npos) << *verdict;
}

TEST(Heartbeat, SlowWaitingOrUnheardRanksAreLeftAlone) {
  PeerBeat busy = heard_at(200, false);
  busy.progress_at_s = 100;
  // This rank is busy too (not waiting): both compute or read, nobody waits for the peer.
  EXPECT_FALSE(judge_peer(3, busy, liveness::Snapshot{}, 200, kTimeout));
  // This rank has waited less than the timeout.
  EXPECT_FALSE(judge_peer(3, busy, self_waiting_since(195), 200, kTimeout));
  // The peer waits on someone else: not its fault.
  PeerBeat waiting = heard_at(200, true);
  waiting.progress_at_s = 100;
  EXPECT_FALSE(judge_peer(3, waiting, self_waiting_since(150), 200, kTimeout));
  // Never heard from (UDP blocked): not judged, whatever the time.
  EXPECT_FALSE(judge_peer(3, PeerBeat{}, self_waiting_since(0), 1e6, kTimeout));
}

TEST(Heartbeat, TheStepIsNamedBeforeTraining) {
  const auto verdict = judge_peer(0, heard_at(0, true, -1), {}, 100, kTimeout);
  ASSERT_TRUE(verdict);
  EXPECT_NE(verdict->find("rank 0 stopped responding before training"), std::string::npos)
      << *verdict;
}

TEST(Liveness, WaitsNestAndProgressCounts) {
  const uint64_t before = liveness::snapshot().progress;
  liveness::note_progress();
  EXPECT_EQ(liveness::snapshot().progress, before + 1);
  EXPECT_FALSE(liveness::snapshot().waiting);
  {
    liveness::WaitingScope outer;
    {
      liveness::WaitingScope inner;
      EXPECT_TRUE(liveness::snapshot().waiting);
    }
    EXPECT_TRUE(liveness::snapshot().waiting);
  }
  EXPECT_FALSE(liveness::snapshot().waiting);
}

}  // namespace
}  // namespace st
