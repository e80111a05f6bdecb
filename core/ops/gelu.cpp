#include "core/ops/gelu.hpp"

#include "core/op_profile.hpp"
#include "core/ops/elementwise.hpp"

namespace st {
namespace {

// Plain template kernels with restrict pointers, so the loops vectorize.
template <class T>
void gelu_forward_kernel(T* __restrict y, const T* __restrict x, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) {
    y[i] = from_f32<T>(gelu(to_f32(x[i])));
  }
}

template <class T>
void gelu_backward_kernel(float* d_in, const float* d_out, const T* __restrict x, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) {
    d_in[i] = d_out[i] * gelu_grad(to_f32(x[i]));
  }
}

}  // namespace

void gelu_forward(void* out, const void* in, size_t n, DType dtype) {
  OpScope scope(OpKind::gelu);
  dispatch_float(dtype, [&]<class T>(T) {
    gelu_forward_kernel(static_cast<T*>(out), static_cast<const T*>(in), n);
  });
}

void gelu_backward(float* d_in, const float* d_out, const void* in, size_t n, DType dtype) {
  OpScope scope(OpKind::gelu);
  dispatch_float(
      dtype, [&]<class T>(T) { gelu_backward_kernel(d_in, d_out, static_cast<const T*>(in), n); });
}

}  // namespace st
