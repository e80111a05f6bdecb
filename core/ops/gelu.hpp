#pragma once
// GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), computed in FP32 as
// x * s with s = (1 + tanh u) / 2 = e / (e + 1), e = e^(2u).
// Row kernels in AVX-512F or AVX2 + FMA where the CPU has them (bit for bit the same results),
// else portable; the vector and portable kernels agree to a few ulp.
#include <cstddef>
#include <cstdint>

#include "core/bf16.hpp"
#include "core/dtype.hpp"
#include "core/ops/fastmath.hpp"

namespace st {

inline constexpr float kGeluSqrt2OverPi = 0.7978845608028654f;
inline constexpr float kGeluCubic = 0.044715f;

// For GELU's u: e = e^(2u), its argument clamped to [-87, 88] as the vector path does (a NaN
// gives e^-87), and r = 1 / (e + 1) = 1 - s.
inline float gelu_exp(float x) {
  float two_u = 2.0f * kGeluSqrt2OverPi * (x + kGeluCubic * x * x * x);
  two_u = two_u > -87.0f ? two_u : -87.0f;
  two_u = two_u < 88.0f ? two_u : 88.0f;
  return fast_exp(two_u);
}

// s = (1 + tanh u) / 2 from e and r: e r where s < 1/2, 1 - r above (accurate both ways, and
// exactly 1 in the far positive tail, so gelu(x) = x there).
inline float gelu_s(float e, float r) {
  return e >= 1.0f ? 1.0f - r : e * r;
}

inline float gelu(float x) {
  const float e = gelu_exp(x);
  return x * gelu_s(e, 1.0f / (e + 1.0f));
}

// d gelu(x) / dx = s + 2 x s (1 - s) du/dx, since 1 - tanh^2 u = 4 s (1 - s).
inline float gelu_grad(float x) {
  const float e = gelu_exp(x), r = 1.0f / (e + 1.0f), s = gelu_s(e, r);
  const float du = kGeluSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
  return s + 2.0f * x * s * r * du;
}

void gelu_forward(void* out, const void* in, size_t n, DType dtype);
// d_in (FP32) = d_out (FP32) * gelu'(in); d_in may alias d_out.
void gelu_backward(float* d_in, const float* d_out, const void* in, size_t n, DType dtype);

// One thread's share: y[i] = gelu(x[i]) for i < n. Results depend only on the value and the
// kernel (not on n or where a row starts), so a fused caller matches gelu_forward bit for bit.
void gelu_row(float* y, const float* x, int64_t n);
void gelu_row(bf16* y, const bf16* x, int64_t n);
// d_in[i] = d_out[i] * gelu'(pre[i]) for i < n, one thread; d_in may be d_out.
void gelu_grad_row(float* d_in, const float* d_out, const float* pre, int64_t n);
void gelu_grad_row(float* d_in, const float* d_out, const bf16* pre, int64_t n);
// The same from an output gradient already rounded to BF16 (by the matmul that made it).
void gelu_grad_row(float* d_in, const bf16* d_out, const bf16* pre, int64_t n);

}  // namespace st
