#pragma once
// Small helpers shared by the ops: reading and writing activations of either float dtype.
#include <algorithm>
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

// FP32 values [n] stored in T, by the calling thread alone (for rows inside a parallel loop):
// BF16 through convert_f32_to_bf16's kernel, bit for bit from_f32. linear_backward's loop that
// rounded each value and added it to the bias sums in one pass was ~3x slower on the Zen 4
// EPYC than the sums followed by this.
inline void store_row(float* out, const float* src, size_t n) {
  std::copy(src, src + n, out);
}
inline void store_row(bf16* out, const float* src, size_t n) {
  convert_f32_to_bf16(src, out, n);  // one thread's kernel inside a parallel region
}

// Calls f(T{}) with T = float for fp32 and T = bf16 for bf16.
template <class F>
decltype(auto) dispatch_float(DType dtype, F&& f) {
  if (dtype == DType::f32) return f(float{});
  if (dtype == DType::bf16) return f(bf16{});
  fail("expected a floating-point dtype, got {}", dtype_name(dtype));
}

// The elementwise kernels with vector paths (GELU, SwiGLU) come in tiers: AVX-512F (sixteen
// lanes), AVX2 + FMA (eight) and portable loops; the AVX-512 kernels repeat the AVX2 ones'
// arithmetic lane for lane, so those two agree bit for bit. The active tier is the best the
// CPU has, at most the cap (SHARDTRAIN_KERNELS=avx2 or portable, or a test comparing tiers).
enum class VectorTier { portable = 0, avx2 = 1, avx512 = 2 };
VectorTier elementwise_tier();
// The best tier this CPU can run, whatever the cap.
VectorTier best_elementwise_tier();
void set_elementwise_cap(VectorTier cap);
const char* vector_tier_name(VectorTier tier);  // "avx512", "avx2-fma" or "portable"
inline const char* elementwise_kernel_name() {
  return vector_tier_name(elementwise_tier());
}

// dst (dst_dtype) = src (src_dtype), element by element; FP32 -> BF16 rounds to nearest even.
void cast(const void* src, DType src_dtype, void* dst, DType dst_dtype, size_t n);

// out[i] = x[i] + y[i] (y in `dtype`), the residual connection in one pass; out and x are FP32
// (out may be x).
void residual_add(float* out, const float* x, const void* y, DType dtype, size_t n);

}  // namespace st
