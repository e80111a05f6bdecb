#include "core/ops/rmsnorm.hpp"

#include <omp.h>

#include <cmath>
#include <vector>

#include "core/op_profile.hpp"
#include "core/ops/elementwise.hpp"

namespace st {

void rmsnorm_forward(void* out, float* rstd, const float* x, const void* weight, int64_t M,
                     int64_t C, float eps, DType dtype) {
  OpScope scope(OpKind::rmsnorm);
  dispatch_float(dtype, [&]<class T>(T) {
    const T* w = static_cast<const T*>(weight);
    T* y = static_cast<T*>(out);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < M; ++i) {
      const float* row = x + i * C;
      float squares = 0.f;
#pragma omp simd reduction(+ : squares)
      for (int64_t c = 0; c < C; ++c) squares += row[c] * row[c];
      const float s = 1.0f / std::sqrt(squares / float(C) + eps);
      T* yrow = y + i * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) yrow[c] = from_f32<T>(row[c] * s * to_f32(w[c]));
      rstd[i] = s;
    }
  });
}

void rmsnorm_backward(float* d_x, float* d_weight, const float* d_out, const float* x,
                      const void* weight, const float* rstd, int64_t M, int64_t C, DType dtype) {
  OpScope scope(OpKind::rmsnorm);
  dispatch_float(dtype, [&]<class T>(T) {
    const T* w = static_cast<const T*>(weight);
    const int threads = omp_get_max_threads();
    // Per-thread partial sums of the weight gradient, added up in thread order at the end.
    std::vector<float> partial(size_t(threads) * size_t(C), 0.f);
#pragma omp parallel num_threads(threads)
    {
      float* dw = partial.data() + size_t(omp_get_thread_num()) * size_t(C);
#pragma omp for schedule(static)
      for (int64_t i = 0; i < M; ++i) {
        const float* xr = x + i * C;
        const float* go = d_out + i * C;
        float* gx = d_x + i * C;
        const float s = rstd[i];
        // y = xhat·w with xhat = x·s: dx = s·(dn − xhat·mean(dn·xhat)), dn = dy·w.
        float sum_gx = 0.f;
#pragma omp simd reduction(+ : sum_gx)
        for (int64_t c = 0; c < C; ++c) {
          const float xhat = xr[c] * s;
          sum_gx += go[c] * to_f32(w[c]) * xhat;
          dw[c] += go[c] * xhat;
        }
        sum_gx /= float(C);
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) {
          const float xhat = xr[c] * s;
          gx[c] += (go[c] * to_f32(w[c]) - xhat * sum_gx) * s;
        }
      }
    }
    for (int t = 0; t < threads; ++t) {
      const float* dw = partial.data() + size_t(t) * size_t(C);
      for (int64_t c = 0; c < C; ++c) d_weight[c] += dw[c];
    }
  });
}

}  // namespace st
