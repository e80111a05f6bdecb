#include "core/ops/attention.hpp"

#include <algorithm>
#include <cmath>

#include "core/op_profile.hpp"
#include "core/ops/attention_bf16.hpp"
#include "core/ops/elementwise.hpp"
#include "core/ops/fastmath.hpp"
#include "core/ops/matmul.hpp"

namespace st {
namespace {

// Views over (batch b, kv head g) pairs, GemmBatch{B, KV}, for the query heads h = g·group + j
// of one j < group: with grouped-query attention one gemm covers the j-th query head of every
// kv group, so each view below takes j (multi-head attention: group 1, j 0, one gemm).
struct Views {
  const AttentionShape& s;
  int64_t C = s.C(), W = s.qkv_width(), hs = s.head_size, group = s.group();

  static const void* at(const void* p, DType d, int64_t elements) {
    return static_cast<const char*>(p) + elements * int64_t(dtype_size(d));
  }
  GemmBatch batch() const { return {s.B, s.KV()}; }
  // Rows [row0, row0 + rows) of query head g·group + j, read in place from the packed
  // [B, T, W] buffer: [rows, hs].
  MatView q(const void* p, DType d, int64_t j, int64_t row0, int64_t rows) const {
    return {at(p, d, row0 * W + j * hs), d, rows, hs, W, 1, group * hs, s.T * W};
  }
  // The same rows of kv head g's key (part 1) or value (part 2).
  MatView kv(const void* p, DType d, int part, int64_t row0, int64_t rows) const {
    const int64_t column = (s.H + (part - 1) * s.KV()) * hs;
    return {at(p, d, row0 * W + column), d, rows, hs, W, 1, hs, s.T * W};
  }
  // Rows [row0, row0 + rows) of query head g·group + j in a [B, T, C] buffer: [rows, hs].
  MatView heads(const void* p, DType d, int64_t j, int64_t row0, int64_t rows) const {
    return {at(p, d, row0 * C + j * hs), d, rows, hs, C, 1, group * hs, s.T * C};
  }
  // The [rows, cols] block at (row0, col0) of query head g·group + j's [T, T] matrix in
  // [B, H, T, T].
  MatView scores(const void* p, DType d, int64_t j, int64_t row0, int64_t col0, int64_t rows,
                 int64_t cols) const {
    return {at(p, d, j * s.T * s.T + row0 * s.T + col0),
            d,
            rows,
            cols,
            s.T,
            1,
            group * s.T * s.T,
            s.H * s.T * s.T};
  }
};

// The keys row t's block computes: [0, end of t's block).
int64_t block_end(const AttentionShape& s, int64_t t) {
  return std::min(s.T, (t / s.block + 1) * s.block);
}

// The general path's scratch is planned only where the AVX512-BF16 kernels do not run.
void check_general_scratch(const AttentionScratch& scratch) {
  ST_CHECK(scratch.scores && scratch.d_y && scratch.d_s,
           "attention: no scratch for the general path (the activations were planned for the "
           "AVX512-BF16 kernels; the kernel tier changed after the model was built)");
}

}  // namespace

void attention_forward(void* out, const void* qkv, const AttentionSaved& saved,
                       const AttentionScratch& scratch, const AttentionShape& s, DType dtype) {
  attention_probs_forward(qkv, saved, scratch, s, dtype);
  attention_values_forward(out, qkv, saved, s, dtype);
}

void attention_probs_forward(const void* qkv, const AttentionSaved& saved,
                             const AttentionScratch& scratch, const AttentionShape& s,
                             DType dtype) {
  OpScope scope(OpKind::attention);
  ST_CHECK(s.block >= 1, "attention block {} must be positive", s.block);
  ST_CHECK(s.KV() >= 1 && s.H % s.KV() == 0, "attention: {} kv heads do not divide {} heads",
           s.KV(), s.H);
  if (attention_bf16_kernels_run(s, dtype))
    return attention_probs_forward_bf16(static_cast<const bf16*>(qkv),
                                        static_cast<bf16*>(saved.probs), s);
  check_general_scratch(scratch);
  const Views v{s};
  const int64_t T = s.T, rows_total = s.B * s.H * s.T;
  GemmOptions scaled;
  scaled.alpha = 1.0f / std::sqrt(float(s.head_size));
  // S = alpha·Q·Kᵀ, block by block, keys up to the block's last row.
  for (int64_t j = 0; j < v.group; ++j)
    for_each_query_block(s, [&](int64_t r0, int64_t rows) {
      gemm(v.batch(), v.q(qkv, dtype, j, r0, rows), v.kv(qkv, dtype, 1, 0, r0 + rows).t(),
           v.scores(scratch.scores, DType::f32, j, r0, 0, rows, r0 + rows), scaled);
    });
  // Causal softmax with FP32 statistics; zeros above the diagonal up to the block's end.
  dispatch_float(dtype, [&]<class X>(X) {
    X* probs = static_cast<X*>(saved.probs);
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows_total; ++row) {
      const int64_t t = row % T;            // query position: keys 0..t are visible
      float* e = scratch.scores + row * T;  // exponentials overwrite the scores in place
      X* p = probs + row * T;
      float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
      for (int64_t j = 0; j <= t; ++j) mx = e[j] > mx ? e[j] : mx;
      float sum = 0.f;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j <= t; ++j) {
        e[j] = fast_exp(e[j] - mx);
        sum += e[j];
      }
      const float inv = 1.0f / sum;
#pragma omp simd
      for (int64_t j = 0; j <= t; ++j) p[j] = from_f32<X>(e[j] * inv);
      for (int64_t j = t + 1, end = block_end(s, t); j < end; ++j) p[j] = from_f32<X>(0.f);
    }
  });
}

void attention_values_forward(void* out, const void* qkv, const AttentionSaved& saved,
                              const AttentionShape& s, DType dtype) {
  OpScope scope(OpKind::attention);
  if (attention_bf16_kernels_run(s, dtype))
    return attention_values_forward_bf16(static_cast<bf16*>(out), static_cast<const bf16*>(qkv),
                                         static_cast<const bf16*>(saved.probs), s);
  const Views v{s};
  // Y = P·V, written into each head's columns of out [B, T, C].
  for (int64_t j = 0; j < v.group; ++j)
    for_each_query_block(s, [&](int64_t r0, int64_t rows) {
      gemm(v.batch(), v.scores(saved.probs, dtype, j, r0, 0, rows, r0 + rows),
           v.kv(qkv, dtype, 2, 0, r0 + rows), v.heads(out, dtype, j, r0, rows));
    });
}

void attention_backward(float* d_qkv, const float* d_out, const void* qkv,
                        const AttentionSaved& saved, const AttentionScratch& scratch,
                        const AttentionShape& s, DType dtype) {
  OpScope scope(OpKind::attention);
  if (attention_bf16_kernels_run(s, dtype))
    return attention_backward_bf16(d_qkv, d_out, static_cast<const bf16*>(qkv),
                                   static_cast<const bf16*>(saved.probs), s);
  check_general_scratch(scratch);
  const Views v{s};
  const int64_t T = s.T, rows_total = s.B * s.H * s.T;
  const void* d_y = d_out;
  if (dtype != DType::f32) {
    cast(d_out, DType::f32, scratch.d_y, dtype, size_t(s.B * T * s.C()));
    d_y = scratch.d_y;
  }
  // dP = dY·Vᵀ (FP32, into the scores scratch), the forward's blocks.
  for (int64_t j = 0; j < v.group; ++j)
    for_each_query_block(s, [&](int64_t r0, int64_t rows) {
      gemm(v.batch(), v.heads(d_y, dtype, j, r0, rows), v.kv(qkv, dtype, 2, 0, r0 + rows).t(),
           v.scores(scratch.scores, DType::f32, j, r0, 0, rows, r0 + rows));
    });
  // Softmax backward: dS = P ⊙ (dP − rowsum(P ⊙ dP)); zeros above the diagonal as in P.
  dispatch_float(dtype, [&]<class X>(X) {
    const X* probs = static_cast<const X*>(saved.probs);
    X* ds = static_cast<X*>(scratch.d_s);
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows_total; ++row) {
      const int64_t t = row % T;
      const X* p = probs + row * T;
      const float* dp = scratch.scores + row * T;
      X* out = ds + row * T;
      float dot = 0.f;
#pragma omp simd reduction(+ : dot)
      for (int64_t j = 0; j <= t; ++j) dot += to_f32(p[j]) * dp[j];
#pragma omp simd
      for (int64_t j = 0; j <= t; ++j) out[j] = from_f32<X>(to_f32(p[j]) * (dp[j] - dot));
      for (int64_t j = t + 1, end = block_end(s, t); j < end; ++j) out[j] = from_f32<X>(0.f);
    }
  });
  GemmOptions scaled;
  scaled.alpha = 1.0f / std::sqrt(float(s.head_size));
  // Keys [k0, k0 + n) are seen by query rows [k0, T): dV = Pᵀ·dY and dK = alpha·dSᵀ·Q over
  // those rows only. A kv head's gradient sums its group's query heads: the first writes, the
  // others add.
  for (int64_t j = 0; j < v.group; ++j) {
    GemmOptions plain, scaled_kv = scaled;
    plain.accumulate = scaled_kv.accumulate = j > 0;
    for_each_query_block(s, [&](int64_t k0, int64_t n) {
      const int64_t seen_by = T - k0;
      gemm(v.batch(), v.scores(saved.probs, dtype, j, k0, k0, seen_by, n).t(),
           v.heads(d_y, dtype, j, k0, seen_by), v.kv(d_qkv, DType::f32, 2, k0, n), plain);
      gemm(v.batch(), v.scores(scratch.d_s, dtype, j, k0, k0, seen_by, n).t(),
           v.q(qkv, dtype, j, k0, seen_by), v.kv(d_qkv, DType::f32, 1, k0, n), scaled_kv);
    });
  }
  // dQ = alpha·dS·K, block by block.
  for (int64_t j = 0; j < v.group; ++j)
    for_each_query_block(s, [&](int64_t r0, int64_t rows) {
      gemm(v.batch(), v.scores(scratch.d_s, dtype, j, r0, 0, rows, r0 + rows),
           v.kv(qkv, dtype, 1, 0, r0 + rows), v.q(d_qkv, DType::f32, j, r0, rows), scaled);
    });
}

}  // namespace st
