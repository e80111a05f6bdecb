#pragma once
// Linear layer in Hugging Face GPT-2's Conv1D layout: weight is [in, out].
#include <cstdint>

#include "core/dtype.hpp"

namespace st {

// out[M,N] = in[M,K] · weight[K,N] + bias[N]. in, weight, bias and out are in `dtype`
// (BF16 inputs accumulate in FP32 inside oneDNN); bias may be null.
void linear_forward(void* out, const void* in, const void* weight, const void* bias, int64_t M,
                    int64_t K, int64_t N, DType dtype);

// Given d_out[M,N] in FP32:
//   d_in[M,K]      = d_out · weightᵀ        (overwritten, FP32; skipped when null)
//   d_weight[K,N] += inᵀ · d_out            (FP32)
//   d_bias[N]     += column sums of d_out   (FP32; skipped when null)
// For BF16, d_out is rounded to BF16 into d_out_scratch [M,N] first (as autocast does).
void linear_backward(float* d_in, float* d_weight, float* d_bias, const float* d_out,
                     void* d_out_scratch, const void* in, const void* weight, int64_t M, int64_t K,
                     int64_t N, DType dtype);

// d_bias[N] += sum over rows of d[M,N].
void add_column_sums(float* d_bias, const float* d, int64_t M, int64_t N);

}  // namespace st
