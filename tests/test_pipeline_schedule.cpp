// Pipeline schedules (parallel/pipeline/schedule.hpp): every rank's list holds each stage's
// forward and backward of every micro-batch once, replays without deadlock, keeps 1F1B's
// micro-batches in flight, and its bubble at equal times is the schedule's theoretical one
// (hand-derived below, independently of the code's formula).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "parallel/pipeline/schedule.hpp"

namespace st {
namespace {

std::string listing(const std::vector<PipeAction>& actions) {
  std::string s;
  for (const PipeAction& a : actions)
    s += std::string(s.empty() ? "" : " ") + pipe_op_name(a.op) + std::to_string(a.micro_batch);
  return s;
}

TEST(PipelineSchedule, OneFOneBByHand) {
  const PipelineSchedule s(PipeSchedule::one_f_one_b, {.ranks = 2, .micro_batches = 3});
  EXPECT_EQ(listing(s.actions(0)), "F0 F1 B0 F2 B1 B2");
  EXPECT_EQ(listing(s.actions(1)), "F0 B0 F1 B1 F2 B2");
  const PipelineSchedule g(PipeSchedule::gpipe, {.ranks = 2, .micro_batches = 3});
  EXPECT_EQ(listing(g.actions(0)), "F0 F1 F2 B0 B1 B2");
  // At P = 2, M = 3 with F = 1 and B = 2: rank 1 starts at 1 and rank 0 ends with its last
  // backward at 1 + 3·3 + 2 = 12 (worked out on paper); each rank computes 9 of the 12.
  const PipeTimeline t =
      simulate_pipeline(s, {.forward = 1, .backward_input = 1, .backward_weight = 1});
  EXPECT_DOUBLE_EQ(t.makespan, 12);
  EXPECT_DOUBLE_EQ(t.bubble(), 0.25);
}

std::string with_stages(const std::vector<PipeAction>& actions) {
  std::string s;
  for (const PipeAction& a : actions)
    s += std::string(s.empty() ? "" : " ") + pipe_op_name(a.op) + std::to_string(a.micro_batch) +
         "s" + std::to_string(a.stage);
  return s;
}

TEST(PipelineSchedule, InterleavedTakesMicroBatchesInGroupsThroughTheVirtualStages) {
  // Megatron's order at P = 2, V = 2, M = 4, worked out by hand: rank 0 holds stages 0 and 2,
  // rank 1 stages 1 and 3; forwards take micro-batches in pairs through the stages in turn,
  // backwards through them in reverse; warm-up (P - 1 - r)·2 + (V - 1)·P = 4 and 2 forwards.
  const PipelineSchedule s(PipeSchedule::interleaved_1f1b,
                           {.ranks = 2, .virtual_stages = 2, .micro_batches = 4});
  EXPECT_EQ(with_stages(s.actions(0)),
            "F0s0 F1s0 F0s2 F1s2 F2s0 B0s2 F3s0 B1s2 F2s2 B0s0 F3s2 B1s0 B2s2 B3s2 B2s0 B3s0");
  EXPECT_EQ(with_stages(s.actions(1)),
            "F0s1 F1s1 F0s3 B0s3 F1s3 B1s3 F2s1 B0s1 F3s1 B1s1 F2s3 B2s3 F3s3 B3s3 B2s1 B3s1");
  // In flight: the warm-up's forwards and the one before the first backward.
  const PipeTimeline t = simulate_pipeline(s, {});
  EXPECT_EQ(t.peak_inflight, (std::vector<int>{5, 3}));
}

TEST(PipelineSchedule, UnequalTimes) {
  // 1F1B at P = 2, M = 3 with F = 1, Bi = 2, W = 1 (a backward of 3), worked out on paper:
  // rank 1 computes from 1 to 13 without a gap, rank 0's last backward waits for it and ends
  // at 16; each rank computes 12 of the 16, a quarter idle, (P-1)/(M+P-1) whatever the times.
  const PipelineSchedule s(PipeSchedule::one_f_one_b, {.ranks = 2, .micro_batches = 3});
  const PipeTimeline t =
      simulate_pipeline(s, {.forward = 1, .backward_input = 2, .backward_weight = 1});
  EXPECT_DOUBLE_EQ(t.makespan, 16);
  EXPECT_DOUBLE_EQ(t.bubble(), 0.25);
  EXPECT_DOUBLE_EQ(s.theoretical_bubble(1, 2, 1), 0.25);
  // ZB-H1 at P = 2, M = 4 with the same times: the drain's one wait (F + Bi = 3) less one W,
  // 2, against a rank's 16: 2/18. A transfer between ranks lengthens the step.
  const PipelineSchedule zb(PipeSchedule::zero_bubble, {.ranks = 2, .micro_batches = 4});
  EXPECT_DOUBLE_EQ(zb.theoretical_bubble(1, 2, 1), 2.0 / 18);
  EXPECT_GT(simulate_pipeline(s, {.transfer = 0.5}).makespan, simulate_pipeline(s, {}).makespan);
}

struct Case {
  PipeSchedule kind;
  int ranks, virtual_stages, micro_batches;
};

std::vector<Case> cases() {
  std::vector<Case> all;
  for (int P : {1, 2, 3, 4})
    for (int M : {1, 2, 4, 8, 16}) {
      all.push_back({PipeSchedule::gpipe, P, 1, M});
      all.push_back({PipeSchedule::one_f_one_b, P, 1, M});
      all.push_back({PipeSchedule::zero_bubble, P, 1, M});
      for (int V : {2, 3})
        if (M % P == 0) all.push_back({PipeSchedule::interleaved_1f1b, P, V, M});
    }
  return all;
}

std::string name(const Case& c) {
  return std::string(pipe_schedule_name(c.kind)) + " P=" + std::to_string(c.ranks) +
         " V=" + std::to_string(c.virtual_stages) + " M=" + std::to_string(c.micro_batches);
}

TEST(PipelineSchedule, EveryScheduleReplaysCompletelyWithItsTheoreticalBubble) {
  for (const Case& c : cases()) {
    const PipelineSchedule s(c.kind, {c.ranks, c.virtual_stages, c.micro_batches});
    // Each stage on its rank; each action once (the replay refuses a repeat or a gap).
    for (int r = 0; r < c.ranks; ++r)
      for (const PipeAction& a : s.actions(r)) ASSERT_EQ(s.rank_of_stage(a.stage), r) << name(c);
    const PipeTimeline t = simulate_pipeline(s, {});
    const double P = c.ranks, M = c.micro_batches, V = c.virtual_stages;
    // Equal times (1 each for F, input and weight gradient): a rank computes 3·V·M. The fill
    // and drain cost one stage's F + B + W on each of the P - 1 other ranks; zero bubble's
    // drain waits only for the input gradients (F + B each), and a deferred weight gradient
    // fills each wait while there are any (M - 1 at most): (P - 1)·(F + B - W) once M >= P.
    const double idle =
        c.kind == PipeSchedule::zero_bubble ? (P - 1) * 2 - std::min(P - 1, M - 1) : (P - 1) * 3;
    const double want = idle / (3 * V * M + idle);
    EXPECT_NEAR(s.theoretical_bubble(1, 1, 1), want, 1e-12) << name(c);
    if (c.kind == PipeSchedule::interleaved_1f1b)  // never worse than theory
      EXPECT_LE(t.bubble(), want + 1e-12) << name(c);
    else
      EXPECT_NEAR(t.bubble(), want, 1e-12) << name(c);
    // Micro-batches in flight (forwarded, weight gradient not yet computed): GPipe all M;
    // 1F1B at most P - r on rank r; zero bubble at most P on any rank (1F1B's peak, rank 0's).
    for (int r = 0; r < c.ranks; ++r) {
      const int peak = t.peak_inflight[size_t(r)];
      if (c.kind == PipeSchedule::gpipe) {
        EXPECT_EQ(peak, c.micro_batches) << name(c);
      } else if (c.kind == PipeSchedule::one_f_one_b) {
        EXPECT_EQ(peak, std::min(c.ranks - r, c.micro_batches)) << name(c) << " rank " << r;
      } else if (c.kind == PipeSchedule::zero_bubble) {
        EXPECT_LE(peak, std::min(c.ranks, c.micro_batches)) << name(c) << " rank " << r;
      }
    }
  }
}

TEST(PipelineSchedule, InterleavingAndZeroBubbleShrinkOneFOneBsBubble) {
  for (int P : {2, 4})
    for (int M : {4, 8, 16}) {
      const double one_f_one_b =
          simulate_pipeline(PipelineSchedule(PipeSchedule::one_f_one_b, {P, 1, M}), {}).bubble();
      const double interleaved =
          simulate_pipeline(PipelineSchedule(PipeSchedule::interleaved_1f1b, {P, 2, M}), {})
              .bubble();
      const double zero_bubble =
          simulate_pipeline(PipelineSchedule(PipeSchedule::zero_bubble, {P, 1, M}), {}).bubble();
      EXPECT_LT(interleaved, one_f_one_b) << "P " << P << " M " << M;
      EXPECT_LT(zero_bubble, one_f_one_b) << "P " << P << " M " << M;
    }
}

TEST(PipelineSchedule, ShapesAScheduleCannotRunAreRefusedByKey) {
  auto refused = [](PipeSchedule kind, PipeShape shape, const std::string& key) {
    try {
      PipelineSchedule s(kind, shape);
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
      return;
    }
    ADD_FAILURE() << "accepted " << pipe_schedule_name(kind);
  };
  refused(PipeSchedule::one_f_one_b, {2, 2, 4}, "parallel.pp_virtual_stages = 2");
  refused(PipeSchedule::interleaved_1f1b, {2, 1, 4}, "parallel.pp_virtual_stages = 1");
  refused(PipeSchedule::interleaved_1f1b, {4, 2, 6}, "training.micro_batches = 6");
  refused(PipeSchedule::gpipe, {2, 1, 0}, "training.micro_batches = 0");
  PipeSchedule parsed;
  EXPECT_TRUE(parse_pipe_schedule("zero_bubble", &parsed));
  EXPECT_EQ(parsed, PipeSchedule::zero_bubble);
  EXPECT_FALSE(parse_pipe_schedule("zb-v", &parsed));
}

}  // namespace
}  // namespace st
