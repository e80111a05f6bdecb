#pragma once
// Linear layers: GPT-2's Conv1D layout (weight [in, out], with bias), and torch.nn.Linear's
// layout (weight [out, in], no bias) read through transposed views, which cost nothing.
#include <cstdint>
#include <span>

#include "core/dtype.hpp"

namespace st {

// out[M,N] = in[M,K] · weight[K,N] + bias[N]. in, weight, bias and out are in `dtype`
// (BF16 inputs accumulate in FP32 inside oneDNN); bias may be null.
void linear_forward(void* out, const void* in, const void* weight, const void* bias, int64_t M,
                    int64_t K, int64_t N, DType dtype);

// The dtypes of linear_backward's activation gradients: FP32, or the layer's dtype where the
// other side only ever reads them rounded. d_in then comes out of the matmul rounded once from
// its FP32 sums (as autocast's BF16 matmul gives it), and d_out is such a d_in: for GPT's MLP,
// whose c_proj d_in only feeds the GELU backward, half the bytes written and read.
struct GradDtypes {
  DType d_in = DType::f32;
  DType d_out = DType::f32;
};

// Given the output gradient g[M,N] (FP32, or `grads.d_out`):
//   d_in[M,K]      = g · weightᵀ        (overwritten, FP32 or `grads.d_in`; skipped when null)
//   d_weight[K,N] += inᵀ · g            (FP32)
//   d_bias[N]     += column sums of g   (FP32; skipped when null)
// g is d_out[M,N], or, when the layer's output went through GELU (`gelu_input` [M,N], dtype:
// the output before GELU), d_out ⊙ gelu'(gelu_input) with d_out the gradient after GELU.
// One pass over d_out makes g, its column sums and, for BF16 or GELU, its copy in
// d_out_scratch [M,N] (dtype; BF16 rounds as autocast does) that the matmuls read.
void linear_backward(void* d_in, float* d_weight, float* d_bias, const void* d_out,
                     void* d_out_scratch, const void* in, const void* weight, int64_t M, int64_t K,
                     int64_t N, DType dtype, const void* gelu_input = nullptr,
                     GradDtypes grads = {});

// nn.Linear layers that read the same input and write side by side into one output, as
// Llama's q/k/v and gate/up projections do: out[M, ΣN] = [in·W₀ᵀ + b₀ | in·W₁ᵀ + b₁ | …], one
// part being a plain linear layer, with a bias (Qwen2's q, k, v) or without.
struct LinearPart {
  const void* weight;  // [N, K], dtype
  float* d_weight;     // [N, K], FP32 (backward only)
  int64_t N;
  const void* bias = nullptr;  // [N], dtype; null: none (added after the matmul, rounded once)
  float* d_bias = nullptr;     // [N], FP32 += the part's column sums (backward only)
};
// out [M, ΣN] and in [M, K] in dtype.
void fused_linear_forward(void* out, const void* in, std::span<const LinearPart> parts, int64_t M,
                          int64_t K, DType dtype);
// d_in[M,K] = Σ d_outₚ · Wₚ (overwritten; skipped when null) and d_Wₚ += d_outₚᵀ · in, from
// d_out [M, ΣN] (FP32). For BF16 the matmuls read d_out rounded into d_out_scratch [M, ΣN].
// d_in is FP32, or (`d_in_dtype` = dtype, one part) rounded once by its matmul, for a
// consumer that reads it only rounded (Llama's down projection feeding SwiGLU's backward).
void fused_linear_backward(void* d_in, const float* d_out, void* d_out_scratch, const void* in,
                           std::span<const LinearPart> parts, int64_t M, int64_t K, DType dtype,
                           DType d_in_dtype = DType::f32);
// The same from an output gradient already in dtype (an op that rounds its own output, as
// swiglu_backward does, saves the cast's pass).
void fused_linear_backward_from(void* d_in, const void* grad, const void* in,
                                std::span<const LinearPart> parts, int64_t M, int64_t K,
                                DType dtype, DType d_in_dtype = DType::f32);

}  // namespace st
