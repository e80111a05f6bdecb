// The FSDP schedule, written out by hand for three units (the root and two blocks): what each
// hook does under ZeRO-3, ZeRO-2, hpZ, deeper prefetch and accumulation without reductions.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "parallel/fsdp/schedule.hpp"

namespace st {
namespace {

std::string describe(const ScheduleShape& shape, int micro = 0) {
  return FsdpSchedule(UnitTopology::root_and_chain(3), shape).describe(micro);
}

// ZeRO-3, prefetch 1: each block is freed after its forward, except the last (the backward
// starts with it); the backward gathers block 1 while block 2 computes, and block 1's gather
// is queued before block 2's reduction.
TEST(FsdpSchedule, Zero3PrefetchOne) {
  EXPECT_EQ(describe({}),
            "before_forward 0: gather 0, gather 1, wait 0\n"
            "before_forward 1: gather 2, wait 1\n"
            "after_forward 1: release 1\n"
            "before_forward 2: wait 2\n"
            "after_forward 2:\n"
            "after_forward 0:\n"
            "before_backward 0: progress 0, wait 0\n"
            "before_backward 2: progress 2, gather 1, wait 2\n"
            "after_backward 2: release 2, progress 2, reduce 2\n"
            "before_backward 1: progress 1, wait 1\n"
            "after_backward 1: release 1, progress 1, reduce 1\n"
            "after_backward 0: release 0, progress 0, reduce 0");
}

// ZeRO-2 keeps every block from the forward: the backward gathers nothing.
TEST(FsdpSchedule, Zero2GathersOncePerMicroBatch) {
  const std::string s = describe({.reshard_after_forward = false});
  EXPECT_EQ(s.find("gather 1", s.find("before_backward")), std::string::npos) << s;
  EXPECT_NE(s.find("after_forward 1:\n"), std::string::npos) << s;
}

// hpZ keeps a slice of block 1 after its forward and gathers it back within the reshard
// group; prefetch 0 gathers each unit only when it is entered, except that the backward still
// queues the next block's gather before this block's reduction.
TEST(FsdpSchedule, HpzRegathersTheKeptSlice) {
  EXPECT_EQ(describe({.prefetch = 0, .keep_slices = true}),
            "before_forward 0: gather 0, wait 0\n"
            "before_forward 1: gather 1, wait 1\n"
            "after_forward 1: keep_slice 1\n"
            "before_forward 2: gather 2, wait 2\n"
            "after_forward 2:\n"
            "after_forward 0:\n"
            "before_backward 0: progress 0, wait 0\n"
            "before_backward 2: progress 2, wait 2\n"
            "after_backward 2: release 2, progress 2, regather 1, reduce 2\n"
            "before_backward 1: progress 1, wait 1\n"
            "after_backward 1: release 1, progress 1, reduce 1\n"
            "after_backward 0: release 0, progress 0, reduce 0");
}

// Accumulating without a reduction per micro-batch: only the last micro-batch reduces.
TEST(FsdpSchedule, ReduceLastReducesInTheLastMicroBatchOnly) {
  const ScheduleShape shape{.prefetch = 2, .reduce_each_micro_batch = false, .micro_batches = 2};
  EXPECT_EQ(describe(shape, 0).find("reduce"), std::string::npos);
  EXPECT_NE(describe(shape, 1).find("reduce 0"), std::string::npos);
  // Prefetch 2 gathers the whole forward at the root's entry.
  EXPECT_EQ(describe(shape, 0).rfind("before_forward 0: gather 0, gather 1, gather 2, wait 0\n", 0),
            0u);
  EXPECT_THROW(FsdpSchedule(UnitTopology::root_and_chain(3), shape).at(Hook::after_backward, 0, 2),
               Error);
}

}  // namespace
}  // namespace st
