#include "core/ops/cross_entropy.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/op_profile.hpp"
#include "core/ops/fastmath.hpp"

namespace st {
namespace {

void check_targets(const int32_t* targets, int64_t M, int64_t V) {
  for (int64_t i = 0; i < M; ++i)
    if (targets[i] < 0 || targets[i] >= V)
      fail("cross-entropy: target {} at row {} is outside the vocabulary [0, {})", targets[i], i,
           V);
}

// Max and log of the sum of exponentials of one row.
void row_stats(const float* row, int64_t V, float& mx, float& log_sum) {
  mx = -INFINITY;
  for (int64_t j = 0; j < V; ++j) mx = row[j] > mx ? row[j] : mx;
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < V; ++j) sum += fast_exp(row[j] - mx);
  log_sum = std::log(sum);
}

}  // namespace

void cross_entropy_forward(float* losses, const float* logits, const int32_t* targets, int64_t M,
                           int64_t V, int64_t ld) {
  OpScope scope(OpKind::cross_entropy);
  check_targets(targets, M, V);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    const float* row = logits + i * ld;
    float mx, log_sum;
    row_stats(row, V, mx, log_sum);
    losses[i] = log_sum + mx - row[targets[i]];
  }
}

void cross_entropy_backward(float* d_logits, const float* logits, const int32_t* targets,
                            float scale, int64_t M, int64_t V, int64_t ld) {
  OpScope scope(OpKind::cross_entropy);
  check_targets(targets, M, V);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    const float* row = logits + i * ld;
    float* out = d_logits + i * ld;
    float mx, log_sum;
    row_stats(row, V, mx, log_sum);
    const float shift = mx + log_sum;
#pragma omp simd
    for (int64_t j = 0; j < V; ++j) out[j] = fast_exp(row[j] - shift) * scale;
    out[targets[i]] -= scale;
    std::fill(out + V, out + ld, 0.f);
  }
}

}  // namespace st
