#pragma once
// A language model's head and loss, the same for every family: logits [M, Vp] = x · headᵀ
// (head [Vp, C]: the token embedding when tied, else lm_head), computed in FP32, and the
// cross-entropy of their first V columns (the rest pad the vocabulary and never count).
#include <cstdint>

#include "core/dtype.hpp"

namespace st {

struct LmHeadShape {
  int64_t M, C, V, Vp;  // tokens, width, vocabulary, padded vocabulary
};

// logits FP32 [M, Vp] and losses FP32 [M] from x [M, C] and head [Vp, C] (dtype); returns the
// sum of the losses. `shifts` FP32 [M] (optional) keeps each row's softmax normalizer for the
// backward.
double lm_head_forward(float* logits, float* losses, const void* x, const void* head,
                       const int32_t* targets, const LmHeadShape& s, DType dtype,
                       float* shifts = nullptr);
// From the forward's logits (FP32: overwritten by their gradient, scaled by `grad_scale`; BF16:
// the gradient is written rounded into `scratch` and the logits are left as they were):
// d_x [M, C] FP32 (overwritten) and d_head [Vp, C] FP32 (added to; the padding rows get zero).
// `scratch` [M, Vp] in dtype holds the gradient the matmuls read when dtype is BF16.
// `shifts`: the forward's, or null (recomputed from the logits).
void lm_head_backward(float* d_x, float* d_head, float* logits, void* scratch, const void* x,
                      const void* head, const int32_t* targets, float grad_scale,
                      const LmHeadShape& s, DType dtype, const float* shifts = nullptr);

}  // namespace st
