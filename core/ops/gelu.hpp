#pragma once
// GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), computed in FP32.
#include <cstddef>

#include "core/dtype.hpp"

namespace st {

void gelu_forward(void* out, const void* in, size_t n, DType dtype);
// d_in (FP32) = d_out (FP32) * gelu'(in); d_in may alias d_out.
void gelu_backward(float* d_in, const float* d_out, const void* in, size_t n, DType dtype);

}  // namespace st
