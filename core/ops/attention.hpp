#pragma once
// Causal multi-head self-attention on a packed qkv activation, as in GPT-2.
#include <cstdint>

#include "core/dtype.hpp"

namespace st {

struct AttentionShape {
  int64_t B, T, H, head_size;  // C = H * head_size
  int64_t C() const { return H * head_size; }
};

// Buffers one attention layer keeps from forward to backward (all in the compute dtype).
struct AttentionSaved {
  void* q;      // [B, H, T, hs]
  void* k;      // [B, H, T, hs]
  void* v;      // [B, H, T, hs]
  void* probs;  // [B, H, T, T], causal softmax of q·kᵀ/sqrt(hs); zero above the diagonal
};

// Scratch shared by all layers (sized by attention_scratch_bytes).
struct AttentionScratch {
  float* scores;  // [B, H, T, T] FP32
  float* d_q;     // [B, H, T, hs] FP32
  float* d_k;     // [B, H, T, hs] FP32
  float* d_v;     // [B, H, T, hs] FP32
  void* d_y;      // [B, H, T, hs] dtype
  void* d_s;      // [B, H, T, T] dtype
};

// out[B,T,C] = attention(qkv[B,T,3C]); qkv holds q, k, v side by side per token.
void attention_forward(void* out, const void* qkv, const AttentionSaved& saved,
                       const AttentionScratch& scratch, const AttentionShape& shape, DType dtype);

// d_qkv[B,T,3C] (FP32, overwritten) from d_out[B,T,C] (FP32).
void attention_backward(float* d_qkv, const float* d_out, const AttentionSaved& saved,
                        const AttentionScratch& scratch, const AttentionShape& shape, DType dtype);

}  // namespace st
