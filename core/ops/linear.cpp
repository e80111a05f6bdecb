#include "core/ops/linear.hpp"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "core/ops/elementwise.hpp"
#include "core/ops/matmul.hpp"

namespace st {

void linear_forward(void* out, const void* in, const void* weight, const void* bias, int64_t M,
                    int64_t K, int64_t N, DType dtype) {
  GemmOptions options;
  options.bias = bias;
  options.bias_dtype = dtype;
  gemm(1, MatView::row_major(in, dtype, M, K), MatView::row_major(weight, dtype, K, N),
       MatView::row_major(out, dtype, M, N), options);
}

void add_column_sums(float* d_bias, const float* d, int64_t M, int64_t N) {
  // Each thread owns a band of columns, so no two threads write the same d_bias entry.
  constexpr int64_t kBand = 64;
#pragma omp parallel for schedule(static)
  for (int64_t c0 = 0; c0 < N; c0 += kBand) {
    const int64_t c1 = std::min(N, c0 + kBand);
    float acc[kBand] = {};
    for (int64_t i = 0; i < M; ++i) {
      const float* row = d + i * N;
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) acc[c - c0] += row[c];
    }
    for (int64_t c = c0; c < c1; ++c) d_bias[c] += acc[c - c0];
  }
}

void linear_backward(float* d_in, float* d_weight, float* d_bias, const float* d_out,
                     void* d_out_scratch, const void* in, const void* weight, int64_t M, int64_t K,
                     int64_t N, DType dtype) {
  const void* g = d_out;
  if (dtype != DType::f32) {
    cast(d_out, DType::f32, d_out_scratch, dtype, size_t(M * N));
    g = d_out_scratch;
  }
  const MatView grad = MatView::row_major(g, dtype, M, N);
  if (d_in)
    gemm(1, grad, MatView::row_major(weight, dtype, K, N).t(),
         MatView::row_major(d_in, DType::f32, M, K));
  GemmOptions accumulate;
  accumulate.accumulate = true;
  gemm(1, MatView::row_major(in, dtype, M, K).t(), grad,
       MatView::row_major(d_weight, DType::f32, K, N), accumulate);
  if (d_bias) add_column_sums(d_bias, d_out, M, N);
}

}  // namespace st
