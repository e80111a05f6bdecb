#pragma once
// The matmul peak that MFU is a fraction of, measured so that a briefly busy machine cannot
// make it look low: the best of several trials at each of several shapes, on this rank's
// threads, now.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.hpp"

namespace st {

struct MatmulShape {
  int64_t m = 0, k = 0, n = 0;  // [m, k] · [k, n] -> [m, n]
  std::string describe() const;
};

// How the ranks that share a machine time a trial together: `start` before each run and
// `finish` after it, inside the timing (barriers: a rank's time runs from when all may begin
// to when all are done, however the OS staggers them), then `slowest` from this rank's seconds
// to the longest any rank measured (a max over ranks). Each rank's rate is its FLOPs over the
// time the whole group took, so the ranks' rates add up to the machine's rate with every rank
// busy at once. Timed alone, ranks outnumbering cores each find a moment with the cores to
// themselves, and their sum counts the machine twice.
struct PeakTrialSync {
  std::function<void()> start, finish;
  std::function<double(double)> slowest;
  int repeats = 1;  // matmuls per trial: the barriers' share of a trial falls with it
};

// The best GFLOP/s over `trials` timed runs (after one warm-up) of each shape: `dtype` inputs,
// FP32 output, as the model's matmuls. Best, not median: load on the machine only ever slows
// a run down, so the fastest run is the closest to what the hardware can do.
double measure_matmul_peak_gflops(DType dtype, const std::vector<MatmulShape>& shapes,
                                  int trials = 5, const PeakTrialSync& sync = {});

}  // namespace st
