#pragma once
// Layer norm over the last dimension, computed in FP32 whatever the parameter dtype.
#include <cstdint>

#include "core/dtype.hpp"

namespace st {

constexpr float kLayerNormEps = 1e-5f;

// out[M,C] (dtype) = (x - mean) * rstd * weight + bias; x FP32 [M,C]; weight, bias [C] in dtype.
// Saves mean[M] and rstd[M] for the backward.
void layernorm_forward(void* out, float* mean, float* rstd, const float* x, const void* weight,
                       const void* bias, int64_t M, int64_t C, DType dtype);

// d_x[M,C] += dL/dx; d_weight[C] += ...; d_bias[C] += ...; d_out FP32 [M,C].
void layernorm_backward(float* d_x, float* d_weight, float* d_bias, const float* d_out,
                        const float* x, const void* weight, const float* mean, const float* rstd,
                        int64_t M, int64_t C, DType dtype);

}  // namespace st
