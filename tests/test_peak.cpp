// The matmul peak that MFU divides by: timed together, the ranks' rates add up to the
// machine's. Checked on the arithmetic, not on timings: a trial's time is what `slowest`
// says it is.
#include <gtest/gtest.h>

#include "launch/peak.hpp"

namespace st {
namespace {

TEST(MatmulPeak, ATrialTakesTheSlowestRanksTime) {
  int started = 0, finished = 0;
  const PeakTrialSync fixed{[&] { ++started; }, [&] { ++finished; }, [](double) { return 0.5; }};
  const MatmulShape shape{64, 32, 16};
  const double gflops = measure_matmul_peak_gflops(DType::f32, {shape, shape}, 3, fixed);
  // Every trial of every shape starts together and counts the slowest rank's 0.5 s.
  EXPECT_EQ(started, 6);
  EXPECT_EQ(finished, 6);
  EXPECT_DOUBLE_EQ(gflops, 2.0 * 64 * 32 * 16 / 0.5 / 1e9);
  // Three matmuls a trial: three times the FLOPs in the trial's time.
  const PeakTrialSync triple{nullptr, nullptr, [](double) { return 0.5; }, 3};
  EXPECT_DOUBLE_EQ(measure_matmul_peak_gflops(DType::f32, {shape}, 2, triple),
                   3 * 2.0 * 64 * 32 * 16 / 0.5 / 1e9);
  // Alone, a rank's own time: some positive rate.
  EXPECT_GT(measure_matmul_peak_gflops(DType::f32, {shape}, 2), 0);
}

}  // namespace
}  // namespace st
