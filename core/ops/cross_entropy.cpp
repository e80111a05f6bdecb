#include "core/ops/cross_entropy.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/op_profile.hpp"
#include "core/ops/elementwise.hpp"
#include "core/ops/fastmath.hpp"

namespace st {
namespace {

void check_targets(const int32_t* targets, int64_t M, int64_t V) {
  for (int64_t i = 0; i < M; ++i)
    if (targets[i] < 0 || targets[i] >= V)
      fail("cross-entropy: target {} at row {} is outside the vocabulary [0, {})", targets[i], i,
           V);
}

// A row's softmax normalizer: max + log Σ exp(logit - max).
float softmax_shift(const float* row, int64_t V) {
  float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
  for (int64_t j = 0; j < V; ++j) mx = row[j] > mx ? row[j] : mx;
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < V; ++j) sum += fast_exp(row[j] - mx);
  return mx + std::log(sum);
}

}  // namespace

void cross_entropy_forward(float* losses, const float* logits, const int32_t* targets, int64_t M,
                           int64_t V, int64_t ld, float* shifts) {
  OpScope scope(OpKind::cross_entropy);
  check_targets(targets, M, V);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    const float* row = logits + i * ld;
    const float shift = softmax_shift(row, V);
    losses[i] = shift - row[targets[i]];
    if (shifts) shifts[i] = shift;
  }
}

namespace {

// Columns a backward row is computed in, in FP32, before it is stored in the output's dtype.
constexpr int64_t kRowChunk = 512;

template <class T>
void backward_rows(T* d_logits, const float* logits, const int32_t* targets, float scale, int64_t M,
                   int64_t V, int64_t ld, const float* shifts, int64_t first = 0) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    const float* row = logits + i * ld;
    T* out = d_logits + i * ld;
    const float shift = shifts ? shifts[i] : softmax_shift(row, V);
    const int64_t target = targets[i] - first;  // outside [0, V): not in this slice
    for (int64_t c0 = 0; c0 < V; c0 += kRowChunk) {
      const int64_t n = std::min(kRowChunk, V - c0);
      float g[kRowChunk];  // the chunk's FP32 gradient, rounded once when stored
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) g[j] = fast_exp(row[c0 + j] - shift) * scale;
      if (target >= c0 && target < c0 + n) g[target - c0] -= scale;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) out[c0 + j] = from_f32<T>(g[j]);
    }
    std::fill(out + V, out + ld, from_f32<T>(0.f));
  }
}

}  // namespace

void cross_entropy_backward(float* d_logits, const float* logits, const int32_t* targets,
                            float scale, int64_t M, int64_t V, int64_t ld, const float* shifts) {
  cross_entropy_backward(d_logits, DType::f32, logits, targets, scale, M, V, ld, shifts);
}

void cross_entropy_backward(void* d_logits, DType out_dtype, const float* logits,
                            const int32_t* targets, float scale, int64_t M, int64_t V, int64_t ld,
                            const float* shifts) {
  OpScope scope(OpKind::cross_entropy);
  check_targets(targets, M, V);
  dispatch_float(out_dtype, [&]<class T>(T) {
    backward_rows(static_cast<T*>(d_logits), logits, targets, scale, M, V, ld, shifts);
  });
}

void cross_entropy_backward_slice(void* d_logits, DType out_dtype, const float* logits,
                                  const int32_t* targets, float scale, int64_t M, int64_t first,
                                  int64_t real, int64_t ld, const float* shifts) {
  OpScope scope(OpKind::cross_entropy);
  ST_CHECK(shifts != nullptr, "a vocabulary slice's gradient needs the whole rows' shifts");
  dispatch_float(out_dtype, [&]<class T>(T) {
    backward_rows(static_cast<T*>(d_logits), logits, targets, scale, M, real, ld, shifts, first);
  });
}

}  // namespace st
