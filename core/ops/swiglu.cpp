#include "core/ops/swiglu.hpp"

#include "core/op_profile.hpp"
#include "core/ops/elementwise.hpp"
#include "core/ops/fastmath.hpp"

namespace st {
namespace {

inline float sigmoid(float x) {
  return 1.0f / (1.0f + fast_exp(-x));
}

template <class T>
void forward_rows(T* __restrict out, const T* __restrict gate_up, int64_t M, int64_t F) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    const T* g = gate_up + i * 2 * F;
    const T* u = g + F;
    T* y = out + i * F;
#pragma omp simd
    for (int64_t c = 0; c < F; ++c) {
      const float gc = to_f32(g[c]);
      y[c] = from_f32<T>(gc * sigmoid(gc) * to_f32(u[c]));
    }
  }
}

template <class T>
void backward_rows(T* __restrict d_gate_up, const float* __restrict d_out,
                   const T* __restrict gate_up, int64_t M, int64_t F) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    const T* g = gate_up + i * 2 * F;
    const T* u = g + F;
    const float* dy = d_out + i * F;
    T* dg = d_gate_up + i * 2 * F;
    T* du = dg + F;
#pragma omp simd
    for (int64_t c = 0; c < F; ++c) {
      const float gc = to_f32(g[c]), s = sigmoid(gc);
      // silu'(g) = s + g·s·(1 − s)
      dg[c] = from_f32<T>(dy[c] * to_f32(u[c]) * s * (1.0f + gc * (1.0f - s)));
      du[c] = from_f32<T>(dy[c] * gc * s);
    }
  }
}

}  // namespace

void swiglu_forward(void* out, const void* gate_up, int64_t M, int64_t F, DType dtype) {
  OpScope scope(OpKind::swiglu);
  dispatch_float(dtype, [&]<class T>(T) {
    forward_rows(static_cast<T*>(out), static_cast<const T*>(gate_up), M, F);
  });
}

void swiglu_backward(void* d_gate_up, const float* d_out, const void* gate_up, int64_t M, int64_t F,
                     DType dtype) {
  OpScope scope(OpKind::swiglu);
  dispatch_float(dtype, [&]<class T>(T) {
    backward_rows(static_cast<T*>(d_gate_up), d_out, static_cast<const T*>(gate_up), M, F);
  });
}

}  // namespace st
