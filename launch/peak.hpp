#pragma once
// The matmul peak that MFU is a fraction of, measured so that a briefly busy machine cannot
// make it look low: the best of several trials at each of several shapes, on this rank's
// threads, now.
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.hpp"

namespace st {

struct MatmulShape {
  int64_t m = 0, k = 0, n = 0;  // [m, k] · [k, n] -> [m, n]
  std::string describe() const;
};

// The best GFLOP/s over `trials` timed runs (after one warm-up) of each shape: `dtype` inputs,
// FP32 output, as the model's matmuls. Best, not median: load on the machine only ever slows
// a run down, so the fastest run is the closest to what the hardware can do.
double measure_matmul_peak_gflops(DType dtype, const std::vector<MatmulShape>& shapes,
                                  int trials = 5);

}  // namespace st
