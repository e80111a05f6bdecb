#pragma once
// Softmax fused with cross-entropy, in FP32.
#include <cstdint>

#include "core/dtype.hpp"

namespace st {

// Rows of `logits` are `ld` >= V apart (a padded vocabulary); only the first V columns count.

// losses[M] = -log softmax(logits[M, :V])[target]. Targets outside [0, V) are an error.
// `shifts` [M] (optional) receives each row's max + log Σ exp(logit - max), which a backward
// given them uses instead of another two passes over the row.
void cross_entropy_forward(float* losses, const float* logits, const int32_t* targets, int64_t M,
                           int64_t V, int64_t ld, float* shifts = nullptr);

// d_logits[M, :V] = (softmax(logits) - onehot(target)) * scale, d_logits[M, V:ld] = 0; may
// overwrite logits in place. `scale` is 1 / (tokens in the whole global step), so per-rank
// gradients add up exactly.
void cross_entropy_backward(float* d_logits, const float* logits, const int32_t* targets,
                            float scale, int64_t M, int64_t V, int64_t ld,
                            const float* shifts = nullptr);
// The same gradient stored in `out_dtype`: BF16 rounds each FP32 value to nearest even once,
// bit for bit the FP32 gradient cast afterwards, so the head's matmuls read it with no cast
// pass (and no FP32 write) between. d_logits [M, ld] in out_dtype; must not overlap logits
// unless FP32.
void cross_entropy_backward(void* d_logits, DType out_dtype, const float* logits,
                            const int32_t* targets, float scale, int64_t M, int64_t V, int64_t ld,
                            const float* shifts = nullptr);

// The gradient of a vocabulary slice's logits (core/ops/vocab_parallel_loss.hpp): columns
// [first, first + ld) of the whole rows, the first `real` of them real, given the whole rows'
// `shifts`; a row's target column is subtracted where this slice holds it.
void cross_entropy_backward_slice(void* d_logits, DType out_dtype, const float* logits,
                                  const int32_t* targets, float scale, int64_t M, int64_t first,
                                  int64_t real, int64_t ld, const float* shifts);

}  // namespace st
