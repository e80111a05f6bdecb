#pragma once
// Softmax fused with cross-entropy, in FP32.
#include <cstdint>

namespace st {

// losses[M] = -log softmax(logits[M,V])[target]. Targets outside [0, V) are an error.
void cross_entropy_forward(float* losses, const float* logits, const int32_t* targets, int64_t M,
                           int64_t V);

// d_logits[M,V] = (softmax(logits) - onehot(target)) * scale; may overwrite logits in place.
// `scale` is 1 / (tokens in the whole global step), so per-rank gradients add up exactly.
void cross_entropy_backward(float* d_logits, const float* logits, const int32_t* targets,
                            float scale, int64_t M, int64_t V);

}  // namespace st
