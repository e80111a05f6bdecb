#pragma once
#include <cstdint>

#include "core/dtype.hpp"

namespace st {

// Median GFLOP/s of an n x n x n oneDNN matmul with `dtype` inputs and FP32 output, measured
// now on the current threads: the "peak" that MFU is a fraction of.
double measure_matmul_peak_gflops(DType dtype, int64_t n = 2048, int repeats = 5);

}  // namespace st
