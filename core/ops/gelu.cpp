#include "core/ops/gelu.hpp"

#include "core/ops/fastmath.hpp"

#include "core/ops/elementwise.hpp"

namespace st {
namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
}  // namespace

void gelu_forward(void* out, const void* in, size_t n, DType dtype) {
  dispatch_float(dtype, [&]<class T>(T) {
    const T* x = static_cast<const T*>(in);
    T* y = static_cast<T*>(out);
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; ++i) {
      const float v = to_f32(x[i]);
      const float u = kSqrt2OverPi * (v + kCubic * v * v * v);
      y[i] = from_f32<T>(0.5f * v * (1.0f + fast_tanh(u)));
    }
  });
}

void gelu_backward(float* d_in, const float* d_out, const void* in, size_t n, DType dtype) {
  dispatch_float(dtype, [&]<class T>(T) {
    const T* x = static_cast<const T*>(in);
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; ++i) {
      const float v = to_f32(x[i]);
      const float u = kSqrt2OverPi * (v + kCubic * v * v * v);
      const float th = fast_tanh(u);
      const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
      const float grad = 0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * du;
      d_in[i] = d_out[i] * grad;
    }
  });
}

}  // namespace st
