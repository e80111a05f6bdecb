#pragma once
// GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), computed in FP32.
#include <cstddef>

#include "core/dtype.hpp"
#include "core/ops/fastmath.hpp"

namespace st {

inline constexpr float kGeluSqrt2OverPi = 0.7978845608028654f;
inline constexpr float kGeluCubic = 0.044715f;

inline float gelu(float x) {
  const float u = kGeluSqrt2OverPi * (x + kGeluCubic * x * x * x);
  return 0.5f * x * (1.0f + fast_tanh(u));
}

// d gelu(x) / dx.
inline float gelu_grad(float x) {
  const float u = kGeluSqrt2OverPi * (x + kGeluCubic * x * x * x);
  const float th = fast_tanh(u);
  const float du = kGeluSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
  return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
}

void gelu_forward(void* out, const void* in, size_t n, DType dtype);
// d_in (FP32) = d_out (FP32) * gelu'(in); d_in may alias d_out.
void gelu_backward(float* d_in, const float* d_out, const void* in, size_t n, DType dtype);

}  // namespace st
