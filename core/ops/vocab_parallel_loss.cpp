#include "core/ops/vocab_parallel_loss.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/op_profile.hpp"
#include "core/ops/fastmath.hpp"

namespace st {

int64_t VocabSlice::real() const {
  return std::clamp<int64_t>(V - first, 0, cols);
}

VocabSlice vocab_slice(int64_t V, int64_t Vp, int t, int ranks) {
  ST_CHECK(ranks >= 1 && t >= 0 && t < ranks && Vp % ranks == 0 && V <= Vp,
           "vocabulary {} (padded {}) over {} tensor-parallel ranks", V, Vp, ranks);
  const int64_t cols = Vp / ranks;
  return {int64_t(t) * cols, cols, V};
}

double vocab_parallel_cross_entropy_forward(const Tensor& losses, const Tensor& shifts,
                                            const float* logits, const int32_t* targets, int64_t M,
                                            const VocabSlice& s, TensorParallel& tp) {
  OpScope scope(OpKind::cross_entropy);
  for (int64_t i = 0; i < M; ++i)
    if (targets[i] < 0 || targets[i] >= s.V)
      fail("cross-entropy: target {} at row {} is outside the vocabulary [0, {})", targets[i], i,
           s.V);
  const int64_t real = s.real();
  float* mx = shifts.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    const float* row = logits + i * s.cols;
    float m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < real; ++j) m = row[j] > m ? row[j] : m;
    mx[i] = m;
  }
  tp.all_reduce_max(shifts);
  // Row i's sum of exponentials at [i], its target's logit (0 where another rank holds it) at
  // [M + i]: one reduction for both.
  Tensor sums = Tensor::empty("vocab-parallel loss sums", {2 * M}, DType::f32);
  float* sum = sums.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    const float* row = logits + i * s.cols;
    const float m = mx[i];
    float acc = 0.f;
#pragma omp simd reduction(+ : acc)
    for (int64_t j = 0; j < real; ++j) acc += fast_exp(row[j] - m);
    sum[i] = acc;
    const int64_t target = targets[i] - s.first;
    sum[M + i] = target >= 0 && target < real ? row[target] : 0.f;
  }
  tp.all_reduce_sum(sums);
  float* loss = losses.data<float>();
  double total = 0;
  for (int64_t i = 0; i < M; ++i) {
    const float shift = mx[i] + std::log(sum[i]);
    mx[i] = shift;
    loss[i] = shift - sum[M + i];
    total += loss[i];
  }
  return total;
}

}  // namespace st
