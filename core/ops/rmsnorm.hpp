#pragma once
// RMS norm over the last dimension (Llama's), computed in FP32 whatever the parameter dtype:
// out = x / sqrt(mean(x²) + eps) * weight. No mean is subtracted and there is no bias.
#include <cstdint>

#include "core/dtype.hpp"

namespace st {

// out[M,C] (dtype) from x FP32 [M,C] and weight [C] (dtype); saves rstd[M] for the backward.
void rmsnorm_forward(void* out, float* rstd, const float* x, const void* weight, int64_t M,
                     int64_t C, float eps, DType dtype);

// d_x[M,C] += dL/dx; d_weight[C] += dL/dweight; d_out FP32 [M,C].
void rmsnorm_backward(float* d_x, float* d_weight, const float* d_out, const float* x,
                      const void* weight, const float* rstd, int64_t M, int64_t C, DType dtype);

}  // namespace st
