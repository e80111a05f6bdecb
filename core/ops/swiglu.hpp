#pragma once
// SwiGLU, Llama's MLP gate: out = silu(gate) ⊙ up with silu(g) = g · sigmoid(g), computed in
// FP32. gate and up sit side by side in one [M, 2F] activation (gate in columns [0, F), up in
// [F, 2F)), as one fused projection writes them.
#include <cstdint>

#include "core/dtype.hpp"

namespace st {

// out[M,F] (dtype) from gate_up[M,2F] (dtype).
void swiglu_forward(void* out, const void* gate_up, int64_t M, int64_t F, DType dtype);
// d_gate_up[M,2F] (dtype, overwritten: rounded once, as the gate and up projections' backward
// matmuls read it) from d_out[M,F] (FP32, or `d_out_dtype` = dtype where the down projection's
// matmul rounded it: read as its exact FP32 value) and the forward's gate_up.
void swiglu_backward(void* d_gate_up, const void* d_out, const void* gate_up, int64_t M, int64_t F,
                     DType dtype, DType d_out_dtype = DType::f32);

}  // namespace st
