#include "core/ops/head_norm.hpp"

#include <cmath>
#include <vector>

#include "core/op_profile.hpp"
#include "core/ops/elementwise.hpp"

namespace st {

void head_rmsnorm_forward(void* x, float* saved, float* rstd, const void* weight, int64_t M,
                          int64_t W, int64_t first, int64_t heads, int64_t hs, float eps,
                          DType dtype) {
  OpScope scope(OpKind::layernorm);
  dispatch_float(dtype, [&]<class T>(T) {
    T* xt = static_cast<T*>(x);
    const T* w = static_cast<const T*>(weight);
#pragma omp parallel for schedule(static) if (M * heads * hs > 32768)
    for (int64_t r = 0; r < M * heads; ++r) {
      const int64_t m = r / heads, h = r % heads;
      T* head = xt + m * W + (first + h) * hs;
      float* in = saved + r * hs;
      float sum = 0;
      for (int64_t i = 0; i < hs; ++i) {
        in[i] = to_f32(head[i]);
        sum += in[i] * in[i];
      }
      const float s = 1.0f / std::sqrt(sum / float(hs) + eps);
      rstd[r] = s;
      for (int64_t i = 0; i < hs; ++i) head[i] = from_f32<T>(in[i] * s * to_f32(w[i]));
    }
  });
}

void head_rmsnorm_backward(float* d, float* d_weight, const float* saved, const void* weight,
                           const float* rstd, int64_t M, int64_t W, int64_t first, int64_t heads,
                           int64_t hs, DType dtype) {
  OpScope scope(OpKind::layernorm);
  dispatch_float(dtype, [&]<class T>(T) {
    const T* w = static_cast<const T*>(weight);
    // d_weight[i] += Σ_rows g_i · x_i · rstd, over rows in order: before d is overwritten.
#pragma omp parallel for schedule(static) if (M * heads * hs > 32768)
    for (int64_t i = 0; i < hs; ++i) {
      double sum = 0;
      for (int64_t r = 0; r < M * heads; ++r) {
        const float g = d[(r / heads) * W + (first + r % heads) * hs + i];
        sum += double(g) * double(saved[r * hs + i]) * double(rstd[r]);
      }
      d_weight[i] += float(sum);
    }
    // dx_i = s·w_i·g_i − x_i·s³·(Σ_j g_j·w_j·x_j) / hs.
#pragma omp parallel for schedule(static) if (M * heads * hs > 32768)
    for (int64_t r = 0; r < M * heads; ++r) {
      float* g = d + (r / heads) * W + (first + r % heads) * hs;
      const float* in = saved + r * hs;
      const float s = rstd[r];
      float dot = 0;
      for (int64_t i = 0; i < hs; ++i) dot += g[i] * to_f32(w[i]) * in[i];
      const float k = s * s * s * dot / float(hs);
      for (int64_t i = 0; i < hs; ++i) g[i] = s * to_f32(w[i]) * g[i] - in[i] * k;
    }
  });
}

}  // namespace st
