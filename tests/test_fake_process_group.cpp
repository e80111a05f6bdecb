// The in-process fake: three "ranks" as threads, checked against hand-computed values.
#include <gtest/gtest.h>

#include <thread>

#include "collectives/agreement.hpp"
#include "collectives/fake_process_group.hpp"
#include "collectives/pending_work.hpp"
#include "core/bf16.hpp"
#include "tests/support/fake_ranks.hpp"
#include "tests/support/p2p_checks.hpp"

namespace st {
namespace {

// send/recv between in-process ranks: the same checks as the MPI backend's.
TEST(FakeProcessGroup, PointToPoint) {
  on_ranks(3, [](ProcessGroup& g) {
    p2p_checks::ring_exchange(g);
    p2p_checks::ordering_and_tags(g);
    p2p_checks::refusals(g);
  });
}

// A BF16 reduce-scatter output: the FP32 sum (1/3 three times, and more) rounded once.
TEST(FakeProcessGroup, ReduceScatterIntoBf16) {
  on_ranks(3, [](ProcessGroup& g) {
    Tensor in = Tensor::empty("grads", {6}, DType::f32);
    for (int i = 0; i < 6; ++i) in.data<float>()[i] = 1.0f / 3 + float(i);
    Tensor out = Tensor::zeros("shard", {2}, DType::bf16);
    g.reduce_scatter(in, out)->wait();
    for (int k = 0; k < 2; ++k) {
      const float x = 1.0f / 3 + float(2 * g.rank() + k);
      EXPECT_EQ(bf16_to_f32(out.data<bf16>()[k]), round_to_bf16(x + x + x));
    }
  });
}

TEST(FakeProcessGroup, CollectivesGiveHandComputedValues) {
  on_ranks(3, [](ProcessGroup& g) {
    const int r = g.rank();
    Tensor in = Tensor::empty("in", {2}, DType::bf16);
    in.data<bf16>()[0] = f32_to_bf16(float(r));
    in.data<bf16>()[1] = f32_to_bf16(float(10 + r));
    Tensor out = Tensor::empty("out", {6}, DType::bf16);
    EXPECT_TRUE(g.all_gather(in, out)->is_completed());
    const float gathered[6] = {0, 10, 1, 11, 2, 12};
    for (int i = 0; i < 6; ++i) EXPECT_EQ(bf16_to_f32(out.data<bf16>()[i]), gathered[i]);

    Tensor grads = Tensor::empty("grads", {6}, DType::f32);
    for (int i = 0; i < 6; ++i) grads.data<float>()[i] = float(i * (r + 1));
    Tensor shard = Tensor::empty("shard", {2}, DType::f32);
    ReduceScatterOptions avg;
    avg.op = ReduceOp::avg;
    g.reduce_scatter(grads, shard, avg)->wait();
    // sum over r of i * (r + 1) = 6 i, averaged over 3 ranks = 2 i, for i in this rank's pair.
    EXPECT_EQ(shard.data<float>()[0], float(2 * (2 * r)));
    EXPECT_EQ(shard.data<float>()[1], float(2 * (2 * r + 1)));

    Tensor norm = Tensor::empty("norm", {1}, DType::f64);
    norm.data<double>()[0] = r + 0.5;
    g.all_reduce(norm)->wait();
    EXPECT_EQ(norm.data<double>()[0], 4.5);

    Tensor seed = Tensor::empty("seed", {1}, DType::i32);
    seed.data<int32_t>()[0] = r == 2 ? 77 : 0;
    g.broadcast(seed, 2)->wait();
    EXPECT_EQ(seed.data<int32_t>()[0], 77);
    g.barrier()->wait();
    EXPECT_THROW(g.all_gather(in, Tensor::empty("short", {5}, DType::bf16)), Error);

    // Integer agreement: an exact max over i64 (sizes, hashes, status codes).
    Tensor big = Tensor::empty("big", {1}, DType::i64);
    big.data<int64_t>()[0] = (int64_t(1) << 40) + r;
    g.all_reduce(big, {.op = ReduceOp::max})->wait();
    EXPECT_EQ(big.data<int64_t>()[0], (int64_t(1) << 40) + 2);
  });
}

// Four ranks split into even and odd groups, the odd ones in reverse order by key; a sub-group
// works like any group, and a negative color gives no group.
TEST(FakeProcessGroup, SplitMakesWorkingSubGroups) {
  on_ranks(4, [](ProcessGroup& g) {
    const int r = g.rank();
    auto sub = g.split(r % 2, r % 2 == 1 ? -r : r);
    ASSERT_TRUE(sub);
    EXPECT_EQ(sub->size(), 2);
    EXPECT_EQ(sub->name(), fmt::format("fake/{}", r % 2));
    const int expected_rank = r % 2 == 0 ? r / 2 : (r == 3 ? 0 : 1);
    EXPECT_EQ(sub->rank(), expected_rank);
    Tensor v = Tensor::empty("v", {1}, DType::f64);
    v.data<double>()[0] = r;
    sub->all_reduce(v)->wait();
    EXPECT_EQ(v.data<double>()[0], r % 2 == 0 ? 0 + 2 : 1 + 3);
    Tensor mine = Tensor::empty("mine", {1}, DType::i32);
    mine.data<int32_t>()[0] = r;
    Tensor all = Tensor::empty("all", {2}, DType::i32);
    sub->all_gather(mine, all)->wait();
    if (r % 2 == 1) {
      EXPECT_EQ(all.data<int32_t>()[0], 3);  // key -3 comes first
      EXPECT_EQ(all.data<int32_t>()[1], 1);
    }
    auto none = g.split(r == 0 ? 5 : -1, 0);
    EXPECT_EQ(bool(none), r == 0);
    if (none) {
      EXPECT_EQ(none->size(), 1);
    }
  });
}

// A collective's bad-input failure keeps its kind through Work::wait (exit code 2 upstream);
// any other failure stays an Error. Both carry the operation's description.
TEST(Work, WaitKeepsTheKindOfTheFailure) {
  PendingWork bad_input("all_gather #3 on group 'g'");
  bad_input.finish(std::make_exception_ptr(InputError("shard of 'w' is empty")));
  try {
    bad_input.wait();
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "all_gather #3 on group 'g' failed: shard of 'w' is empty");
  }
  PendingWork broken("barrier #1");
  broken.finish(std::make_exception_ptr(std::runtime_error("peer vanished")));
  try {
    broken.wait();
    FAIL();
  } catch (const InputError&) {
    FAIL() << "a runtime failure became bad input";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "barrier #1 failed: peer vanished");
  }
}

}  // namespace
}  // namespace st

namespace st {
namespace {

// A failure on some ranks only reaches every rank, with the lowest failing rank's message and
// kind, and the group stays usable (no rank is left in a collective).
TEST(Agreement, OneRanksFailureReachesEveryRank) {
  std::vector<std::string> seen(3);
  on_ranks(3, [&](ProcessGroup& g) {
    try {
      run_agreed(g, [&] {
        if (g.rank() == 1) fail_input("rank one's bad input");
        if (g.rank() == 2) fail("rank two's failure");
      });
    } catch (const InputError& e) {
      seen[size_t(g.rank())] = e.what();
    }
    const auto f = agree_on_failure(g, [&] {
      if (g.rank() == 2) fail("only rank two");
    });
    ASSERT_TRUE(f.has_value());
    EXPECT_EQ(f->rank, 2);
    EXPECT_EQ(f->code, 1);
    EXPECT_EQ(f->failed, 1);
    EXPECT_EQ(f->message, "only rank two");
    EXPECT_FALSE(agree_on_failure(g, [] {}).has_value());
  });
  for (const std::string& s : seen)
    EXPECT_EQ(s, "rank 1 of group 'fake' (3 ranks): rank one's bad input");
}

}  // namespace
}  // namespace st
