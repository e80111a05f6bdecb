#include "core/ops/embedding.hpp"

#include <algorithm>
#include <cstdint>

#include "core/error.hpp"
#include "core/op_profile.hpp"
#include "core/ops/elementwise.hpp"

namespace st {
namespace {

void check_tokens(const int32_t* tokens, int64_t n, int64_t V) {
  for (int64_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= V)
      fail("embedding: token {} at position {} is outside the vocabulary [0, {})", tokens[i], i, V);
}

}  // namespace

void embedding_forward(float* out, const int32_t* tokens, const void* wte, const void* wpe,
                       int64_t B, int64_t T, int64_t C, int64_t V, DType dtype) {
  OpScope scope(OpKind::embedding);
  check_tokens(tokens, B * T, V);
  dispatch_float(dtype, [&]<class X>(X) {
    const X* te = static_cast<const X*>(wte);
    const X* pe = static_cast<const X*>(wpe);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < B * T; ++i) {
      const X* a = te + int64_t(tokens[i]) * C;
      float* o = out + i * C;
      if (pe) {
        const X* p = pe + (i % T) * C;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) o[c] = to_f32(a[c]) + to_f32(p[c]);
      } else {
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) o[c] = to_f32(a[c]);
      }
    }
  });
}

void embedding_backward(float* d_wte, float* d_wpe, const float* d_out, const int32_t* tokens,
                        int64_t B, int64_t T, int64_t C) {
  embedding_backward_slice(d_wte, 0, INT64_MAX, d_wpe, d_out, tokens, B, T, C);
}

void embedding_forward_slice(float* out, const int32_t* tokens, const void* wte_rows, int64_t first,
                             int64_t rows, int64_t B, int64_t T, int64_t C, int64_t V,
                             DType dtype) {
  OpScope scope(OpKind::embedding);
  check_tokens(tokens, B * T, V);
  dispatch_float(dtype, [&]<class X>(X) {
    const X* te = static_cast<const X*>(wte_rows);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < B * T; ++i) {
      const int64_t row = int64_t(tokens[i]) - first;
      float* o = out + i * C;
      if (row < 0 || row >= rows) {
        std::fill(o, o + C, 0.f);
        continue;
      }
      const X* a = te + row * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) o[c] = to_f32(a[c]);
    }
  });
}

void add_position_embedding(float* out, const void* wpe, int64_t B, int64_t T, int64_t C,
                            DType dtype) {
  OpScope scope(OpKind::embedding);
  dispatch_float(dtype, [&]<class X>(X) {
    const X* pe = static_cast<const X*>(wpe);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < B * T; ++i) {
      const X* p = pe + (i % T) * C;
      float* o = out + i * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) o[c] += to_f32(p[c]);
    }
  });
}

void embedding_backward_slice(float* d_wte_rows, int64_t first, int64_t rows, float* d_wpe,
                              const float* d_out, const int32_t* tokens, int64_t B, int64_t T,
                              int64_t C) {
  OpScope scope(OpKind::embedding);
  // Threads own bands of channels, so rows sharing a token never race.
  constexpr int64_t kBand = 32;
#pragma omp parallel for schedule(static)
  for (int64_t c0 = 0; c0 < C; c0 += kBand) {
    const int64_t c1 = std::min(C, c0 + kBand);
    for (int64_t i = 0; i < B * T; ++i) {
      const float* g = d_out + i * C;
      const int64_t row = int64_t(tokens[i]) - first;
      if (row >= 0 && row < rows) {
        float* te = d_wte_rows + row * C;
        for (int64_t c = c0; c < c1; ++c) te[c] += g[c];
      }
      if (!d_wpe) continue;
      float* pe = d_wpe + (i % T) * C;
      for (int64_t c = c0; c < c1; ++c) pe[c] += g[c];
    }
  }
}

}  // namespace st
