#pragma once
// Causal attention in BF16 on CPUs with AVX512-BF16: attention.hpp's three functions with their
// matmuls and the softmax in one pass over each query block, through one register-tiled
// vdpbf16ps kernel, instead of a oneDNN call per block plus separate passes over the scores.
// Same inputs, outputs and saved probabilities as the general path; the sums run in another
// order, so results agree within BF16 rounding (tests/test_attention_bf16.cpp). Called by
// attention.cpp where attention_bf16_kernels_run says so; not a public entry point.
#include "core/dtype.hpp"
#include "core/ops/attention.hpp"

namespace st {

// Whether these kernels run: BF16 compute, a CPU with AVX512-BF16 under the avx512 tier
// (SHARDTRAIN_KERNELS=avx2 or portable turns them off), the native BF16 matmul path (not
// `widened`), head size 32, 64 or 128, and an even sequence length and block.
bool attention_bf16_kernels_run(const AttentionShape& s, DType dtype);

// saved probabilities [B, H, T, T] from qkv [B, T, W], as attention_probs_forward.
void attention_probs_forward_bf16(const bf16* qkv, bf16* probs, const AttentionShape& s);
// out [B, T, H·hs] = probs · v, as attention_values_forward.
void attention_values_forward_bf16(bf16* out, const bf16* qkv, const bf16* probs,
                                   const AttentionShape& s);
// d_qkv [B, T, W] (FP32, overwritten) from d_out [B, T, H·hs] (FP32), as attention_backward.
void attention_backward_bf16(float* d_qkv, const float* d_out, const bf16* qkv, const bf16* probs,
                             const AttentionShape& s);

}  // namespace st
