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

// The vocabulary-parallel forms (tensor parallelism): `wte_rows` holds rows [first, first + rows)
// of the whole table. out[B,T,C] = those rows of the tokens this slice holds, zero rows for the
// others (the group's all-reduce then adds each token's owner's row); tokens must be in [0, V).
void embedding_forward_slice(float* out, const int32_t* tokens, const void* wte_rows, int64_t first,
                             int64_t rows, int64_t B, int64_t T, int64_t C, int64_t V, DType dtype);
// out[B,T,C] += wpe[t] (after the all-reduce of embedding_forward_slice's rows).
void add_position_embedding(float* out, const void* wpe, int64_t B, int64_t T, int64_t C,
                            DType dtype);
// d_wte_rows[rows, C] += scatter of d_out by the tokens this slice holds; d_wpe[T,C] (unless
// null) += sum of d_out over the batch.
void embedding_backward_slice(float* d_wte_rows, int64_t first, int64_t rows, float* d_wpe,
                              const float* d_out, const int32_t* tokens, int64_t B, int64_t T,
                              int64_t C);

}  // namespace st
