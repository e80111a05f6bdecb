#pragma once
// Small helpers shared by the ops: reading and writing activations of either float dtype.
#include <cstddef>
#include <utility>

#include "core/bf16.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"

namespace st {

inline float to_f32(float x) {
  return x;
}
inline float to_f32(bf16 x) {
  return bf16_to_f32(x);
}

template <class T>
inline T from_f32(float x);
template <>
inline float from_f32<float>(float x) {
  return x;
}
template <>
inline bf16 from_f32<bf16>(float x) {
  return f32_to_bf16(x);
}

// Calls f(T{}) with T = float for fp32 and T = bf16 for bf16.
template <class F>
decltype(auto) dispatch_float(DType dtype, F&& f) {
  if (dtype == DType::f32) return f(float{});
  if (dtype == DType::bf16) return f(bf16{});
  fail("expected a floating-point dtype, got {}", dtype_name(dtype));
}

// Whether the elementwise kernels with a vector path (GELU, SwiGLU) take their AVX2 + FMA one:
// the CPU has AVX2 and FMA and the portable kernels are not forced (SHARDTRAIN_KERNELS=portable,
// or a test comparing the two).
bool elementwise_avx2();
void set_elementwise_portable(bool portable);
const char* elementwise_kernel_name();  // "avx2-fma" or "portable"

// dst (dst_dtype) = src (src_dtype), element by element; FP32 -> BF16 rounds to nearest even.
void cast(const void* src, DType src_dtype, void* dst, DType dst_dtype, size_t n);

// out[i] = x[i] + y[i] (y in `dtype`), the residual connection in one pass; out and x are FP32
// (out may be x).
void residual_add(float* out, const float* x, const void* y, DType dtype, size_t n);

}  // namespace st
