#include "core/ops/gelu.hpp"

#include "core/ops/elementwise.hpp"
#include "core/ops/fastmath.hpp"

namespace st {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

// Plain template kernels with restrict pointers, so the loops vectorize.
template <class T>
void gelu_forward_kernel(T* __restrict y, const T* __restrict x, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const float v = to_f32(x[i]);
    const float u = kSqrt2OverPi * (v + kCubic * v * v * v);
    y[i] = from_f32<T>(0.5f * v * (1.0f + fast_tanh(u)));
  }
}

template <class T>
void gelu_backward_kernel(float* d_in, const float* d_out, const T* __restrict x, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const float v = to_f32(x[i]);
    const float u = kSqrt2OverPi * (v + kCubic * v * v * v);
    const float th = fast_tanh(u);
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
    d_in[i] = d_out[i] * (0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * du);
  }
}

}  // namespace

void gelu_forward(void* out, const void* in, size_t n, DType dtype) {
  dispatch_float(dtype, [&]<class T>(T) {
    gelu_forward_kernel(static_cast<T*>(out), static_cast<const T*>(in), n);
  });
}

void gelu_backward(float* d_in, const float* d_out, const void* in, size_t n, DType dtype) {
  dispatch_float(
      dtype, [&]<class T>(T) { gelu_backward_kernel(d_in, d_out, static_cast<const T*>(in), n); });
}

}  // namespace st
