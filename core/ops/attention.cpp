#include "core/ops/attention.hpp"

#include <cmath>

#include "core/ops/elementwise.hpp"
#include "core/ops/fastmath.hpp"
#include "core/ops/matmul.hpp"

namespace st {
namespace {

MatView heads(const void* data, DType dtype, const AttentionShape& s, int64_t cols) {
  return {data, dtype, s.T, cols, cols, 1, s.T * cols};
}

}  // namespace

void attention_forward(void* out, const void* qkv, const AttentionSaved& saved,
                       const AttentionScratch& scratch, const AttentionShape& s, DType dtype) {
  const int64_t B = s.B, T = s.T, H = s.H, hs = s.head_size, C = s.C();
  dispatch_float(dtype, [&]<class X>(X) {
    const X* in = static_cast<const X*>(qkv);
    X* q = static_cast<X*>(saved.q);
    X* k = static_cast<X*>(saved.k);
    X* v = static_cast<X*>(saved.v);
    // [B,T,3C] -> three [B,H,T,hs] so every head is one contiguous matrix.
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        const X* row = in + (b * T + t) * 3 * C;
        for (int64_t h = 0; h < H; ++h) {
          const int64_t dst = ((b * H + h) * T + t) * hs;
          for (int64_t d = 0; d < hs; ++d) {
            q[dst + d] = row[h * hs + d];
            k[dst + d] = row[C + h * hs + d];
            v[dst + d] = row[2 * C + h * hs + d];
          }
        }
      }
  });
  const int64_t BH = B * H;
  GemmOptions scaled;
  scaled.alpha = 1.0f / std::sqrt(float(hs));
  gemm(BH, heads(saved.q, dtype, s, hs), heads(saved.k, dtype, s, hs).t(),
       heads(scratch.scores, DType::f32, s, T), scaled);
  dispatch_float(dtype, [&]<class X>(X) {
    X* probs = static_cast<X*>(saved.probs);
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < BH * T; ++row) {
      const int64_t t = row % T;  // query position: keys 0..t are visible
      const float* sc = scratch.scores + row * T;
      X* p = probs + row * T;
      float mx = -INFINITY;
      for (int64_t j = 0; j <= t; ++j) mx = sc[j] > mx ? sc[j] : mx;
      float sum = 0.f;
      float* e = scratch.scores + row * T;  // exponentials overwrite the scores in place
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j <= t; ++j) {
        e[j] = fast_exp(sc[j] - mx);
        sum += e[j];
      }
      const float inv = 1.0f / sum;
#pragma omp simd
      for (int64_t j = 0; j <= t; ++j) p[j] = from_f32<X>(e[j] * inv);
      for (int64_t j = t + 1; j < T; ++j) p[j] = from_f32<X>(0.f);
    }
  });
  // y = P·V, written head by head into a [BH,T,hs] buffer (d_y scratch), then back to [B,T,C].
  gemm(BH, heads(saved.probs, dtype, s, T), heads(saved.v, dtype, s, hs),
       heads(scratch.d_y, dtype, s, hs));
  dispatch_float(dtype, [&]<class X>(X) {
    const X* y = static_cast<const X*>(scratch.d_y);
    X* o = static_cast<X*>(out);
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h) {
          const X* src = y + ((b * H + h) * T + t) * hs;
          X* dst = o + (b * T + t) * C + h * hs;
          for (int64_t d = 0; d < hs; ++d) dst[d] = src[d];
        }
  });
}

void attention_backward(float* d_qkv, const float* d_out, const AttentionSaved& saved,
                        const AttentionScratch& scratch, const AttentionShape& s, DType dtype) {
  const int64_t B = s.B, T = s.T, H = s.H, hs = s.head_size, C = s.C(), BH = B * H;
  dispatch_float(dtype, [&]<class X>(X) {
    X* dy = static_cast<X*>(scratch.d_y);
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h) {
          const float* src = d_out + (b * T + t) * C + h * hs;
          X* dst = dy + ((b * H + h) * T + t) * hs;
          for (int64_t d = 0; d < hs; ++d) dst[d] = from_f32<X>(src[d]);
        }
  });
  // dP = dY·Vᵀ [BH,T,T] (FP32, into the scores scratch); dV = Pᵀ·dY.
  gemm(BH, heads(scratch.d_y, dtype, s, hs), heads(saved.v, dtype, s, hs).t(),
       heads(scratch.scores, DType::f32, s, T));
  gemm(BH, heads(saved.probs, dtype, s, T).t(), heads(scratch.d_y, dtype, s, hs),
       heads(scratch.d_v, DType::f32, s, hs));
  // Softmax backward: dS = P ⊙ (dP − rowsum(P ⊙ dP)).
  dispatch_float(dtype, [&]<class X>(X) {
    const X* probs = static_cast<const X*>(saved.probs);
    X* ds = static_cast<X*>(scratch.d_s);
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < BH * T; ++row) {
      const int64_t t = row % T;
      const X* p = probs + row * T;
      const float* dp = scratch.scores + row * T;
      X* out = ds + row * T;
      float dot = 0.f;
#pragma omp simd reduction(+ : dot)
      for (int64_t j = 0; j <= t; ++j) dot += to_f32(p[j]) * dp[j];
#pragma omp simd
      for (int64_t j = 0; j <= t; ++j) out[j] = from_f32<X>(to_f32(p[j]) * (dp[j] - dot));
      for (int64_t j = t + 1; j < T; ++j) out[j] = from_f32<X>(0.f);
    }
  });
  // S = alpha·Q·Kᵀ, so dQ = alpha·dS·K and dK = alpha·dSᵀ·Q.
  GemmOptions scaled;
  scaled.alpha = 1.0f / std::sqrt(float(hs));
  gemm(BH, heads(scratch.d_s, dtype, s, T), heads(saved.k, dtype, s, hs),
       heads(scratch.d_q, DType::f32, s, hs), scaled);
  gemm(BH, heads(scratch.d_s, dtype, s, T).t(), heads(saved.q, dtype, s, hs),
       heads(scratch.d_k, DType::f32, s, hs), scaled);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t src = ((b * H + h) * T + t) * hs;
        float* row = d_qkv + (b * T + t) * 3 * C + h * hs;
        for (int64_t d = 0; d < hs; ++d) {
          row[d] = scratch.d_q[src + d];
          row[C + d] = scratch.d_k[src + d];
          row[2 * C + d] = scratch.d_v[src + d];
        }
      }
}

}  // namespace st
