#pragma once
// Qwen3's q/k norm: an RMSNorm over each attention head's channels (not the whole row), with
// one weight [hs] shared by the heads it normalizes, computed in FP32 whatever the dtype:
// y = x / sqrt(mean(x²) + eps) * weight, per head.
#include <cstdint>

#include "core/dtype.hpp"

namespace st {

// Heads [first, first + heads) of every row of x [M, W] (dtype; each head hs wide), normalized
// in place. Saves the heads' input, FP32 [M·heads, hs], and rstd [M·heads] for the backward.
void head_rmsnorm_forward(void* x, float* saved, float* rstd, const void* weight, int64_t M,
                          int64_t W, int64_t first, int64_t heads, int64_t hs, float eps,
                          DType dtype);

// The backward, in place on d [M, W] (FP32): those heads' gradient after the norm becomes the
// gradient before it; d_weight[hs] += dL/dweight (summed in a fixed order). The other columns
// of d are left as they are.
void head_rmsnorm_backward(float* d, float* d_weight, const float* saved, const void* weight,
                           const float* rstd, int64_t M, int64_t W, int64_t first, int64_t heads,
                           int64_t hs, DType dtype);

}  // namespace st
