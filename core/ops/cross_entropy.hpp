#pragma once
// Softmax fused with cross-entropy, in FP32.
#include <cstdint>

namespace st {

// Rows of `logits` are `ld` >= V apart (a padded vocabulary); only the first V columns count.

// losses[M] = -log softmax(logits[M, :V])[target]. Targets outside [0, V) are an error.
void cross_entropy_forward(float* losses, const float* logits, const int32_t* targets, int64_t M,
                           int64_t V, int64_t ld);

// d_logits[M, :V] = (softmax(logits) - onehot(target)) * scale, d_logits[M, V:ld] = 0; may
// overwrite logits in place. `scale` is 1 / (tokens in the whole global step), so per-rank
// gradients add up exactly.
void cross_entropy_backward(float* d_logits, const float* logits, const int32_t* targets,
                            float scale, int64_t M, int64_t V, int64_t ld);

}  // namespace st
