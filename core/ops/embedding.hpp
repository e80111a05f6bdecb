#pragma once
// Token embedding, plus a learned position embedding (GPT-2's wpe; Llama has none: null); the
// residual stream it starts is FP32.
#include <cstdint>

#include "core/dtype.hpp"

namespace st {

// out[B,T,C] = wte[tokens[b,t]] (+ wpe[t]); wte [V,C], wpe [>=T,C] or null, in `dtype`.
void embedding_forward(float* out, const int32_t* tokens, const void* wte, const void* wpe,
                       int64_t B, int64_t T, int64_t C, int64_t V, DType dtype);

// d_wte[V,C] += scatter of d_out by token; d_wpe[T,C] (unless null) += sum of d_out over the
// batch.
void embedding_backward(float* d_wte, float* d_wpe, const float* d_out, const int32_t* tokens,
                        int64_t B, int64_t T, int64_t C);

}  // namespace st
