#include "core/ops/layernorm.hpp"

#include <omp.h>

#include <cmath>
#include <vector>

#include "core/op_profile.hpp"
#include "core/ops/elementwise.hpp"

namespace st {

void layernorm_forward(void* out, float* mean, float* rstd, const float* x, const void* weight,
                       const void* bias, int64_t M, int64_t C, DType dtype) {
  OpScope scope(OpKind::layernorm);
  dispatch_float(dtype, [&]<class T>(T) {
    const T* w = static_cast<const T*>(weight);
    const T* b = static_cast<const T*>(bias);
    T* y = static_cast<T*>(out);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < M; ++i) {
      const float* row = x + i * C;
      float sum = 0.f;
#pragma omp simd reduction(+ : sum)
      for (int64_t c = 0; c < C; ++c) sum += row[c];
      const float m = sum / float(C);
      float var = 0.f;
#pragma omp simd reduction(+ : var)
      for (int64_t c = 0; c < C; ++c) var += (row[c] - m) * (row[c] - m);
      const float s = 1.0f / std::sqrt(var / float(C) + kLayerNormEps);
      T* yrow = y + i * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c)
        yrow[c] = from_f32<T>((row[c] - m) * s * to_f32(w[c]) + to_f32(b[c]));
      mean[i] = m;
      rstd[i] = s;
    }
  });
}

void layernorm_backward(float* d_x, float* d_weight, float* d_bias, const float* d_out,
                        const float* x, const void* weight, const float* mean, const float* rstd,
                        int64_t M, int64_t C, DType dtype) {
  OpScope scope(OpKind::layernorm);
  dispatch_float(dtype, [&]<class T>(T) {
    const T* w = static_cast<const T*>(weight);
    const int threads = omp_get_max_threads();
    // Per-thread partial sums for the parameter gradients, added up at the end.
    std::vector<float> partial(size_t(threads) * size_t(2 * C), 0.f);
#pragma omp parallel num_threads(threads)
    {
      float* dw = partial.data() + size_t(omp_get_thread_num()) * size_t(2 * C);
      float* db = dw + C;
#pragma omp for schedule(static)
      for (int64_t i = 0; i < M; ++i) {
        const float* xr = x + i * C;
        const float* go = d_out + i * C;
        float* gx = d_x + i * C;
        const float m = mean[i], s = rstd[i];
        float sum_g = 0.f, sum_gx = 0.f;  // mean of dnorm and of dnorm * xhat
#pragma omp simd reduction(+ : sum_g, sum_gx)
        for (int64_t c = 0; c < C; ++c) {
          const float xhat = (xr[c] - m) * s;
          const float dn = go[c] * to_f32(w[c]);
          sum_g += dn;
          sum_gx += dn * xhat;
          dw[c] += go[c] * xhat;
          db[c] += go[c];
        }
        sum_g /= float(C);
        sum_gx /= float(C);
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) {
          const float xhat = (xr[c] - m) * s;
          const float dn = go[c] * to_f32(w[c]);
          gx[c] += (dn - sum_g - xhat * sum_gx) * s;
        }
      }
    }
    for (int t = 0; t < threads; ++t) {
      const float* dw = partial.data() + size_t(t) * size_t(2 * C);
      for (int64_t c = 0; c < C; ++c) {
        d_weight[c] += dw[c];
        d_bias[c] += dw[C + c];
      }
    }
  });
}

}  // namespace st
