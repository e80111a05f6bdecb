#pragma once
// Causal multi-head self-attention on a packed qkv activation, as in GPT-2, with grouped-query
// attention as in Llama (fewer key/value heads than query heads: query head h reads kv head
// h / (H / kv_heads)). The matmuls read each head straight out of the packed [B, T, W] buffer
// through strided views (no head-major copies), and work in blocks of query rows: a block's
// keys stop at its last row, so the blocks above the causal diagonal (about half of T x T) are
// never computed.
#include <algorithm>
#include <cstdint>

#include "core/dtype.hpp"

namespace st {

struct AttentionShape {
  int64_t B, T, H, head_size;  // C = H * head_size
  int64_t block = 64;          // query rows per causal block
  int64_t kv_heads = 0;        // key/value heads, dividing H; 0: H (multi-head attention)
  int64_t C() const { return H * head_size; }
  int64_t KV() const { return kv_heads > 0 ? kv_heads : H; }
  // Query heads per kv head.
  int64_t group() const { return H / KV(); }
  // Columns of the packed qkv row: q (H heads), then k and v (KV() heads each).
  int64_t qkv_width() const { return (H + 2 * KV()) * head_size; }
};

// The causal blocks: query rows [r0, r0 + rows) see keys [0, r0 + rows).
template <class F>
void for_each_query_block(const AttentionShape& s, F&& f) {
  for (int64_t r0 = 0; r0 < s.T; r0 += s.block) f(r0, std::min(s.block, s.T - r0));
}

// What one attention layer keeps from forward to backward, besides its qkv input.
struct AttentionSaved {
  // [B, H, T, T] (compute dtype): the causal softmax of q·kᵀ/sqrt(hs). Only each query block's
  // keys [0, block end) are written (zero above the diagonal inside them); the rest is never
  // read.
  void* probs;
};

// Scratch shared by all layers; the general path's only: null where the AVX512-BF16 kernels
// run (attention_bf16.hpp), which keep their tiles per thread.
struct AttentionScratch {
  float* scores;  // [B, H, T, T] FP32 (the same blocks as probs)
  void* d_y;      // [B, T, C] compute dtype
  void* d_s;      // [B, H, T, T] compute dtype (the same blocks as probs)
};

// out[B,T,C] = attention(qkv[B,T,W]), W = qkv_width(); qkv holds q, k, v side by side per
// token. Both in the compute dtype. The two halves below, in order.
void attention_forward(void* out, const void* qkv, const AttentionSaved& saved,
                       const AttentionScratch& scratch, const AttentionShape& shape, DType dtype);
// The attention core: saved.probs = causal softmax(q·kᵀ / sqrt(hs)).
void attention_probs_forward(const void* qkv, const AttentionSaved& saved,
                             const AttentionScratch& scratch, const AttentionShape& shape,
                             DType dtype);
// out = probs · v, each head into its columns of out [B,T,C].
void attention_values_forward(void* out, const void* qkv, const AttentionSaved& saved,
                              const AttentionShape& shape, DType dtype);

// d_qkv[B,T,W] (FP32, overwritten) from d_out[B,T,C] (FP32) and the forward's qkv; a shared kv
// head's gradient is the sum over the query heads that read it.
void attention_backward(float* d_qkv, const float* d_out, const void* qkv,
                        const AttentionSaved& saved, const AttentionScratch& scratch,
                        const AttentionShape& shape, DType dtype);

}  // namespace st
