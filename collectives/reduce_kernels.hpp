#pragma once
// The FP32 accumulation loops the reduce-scatter algorithms share.
#include <cstddef>
#include <cstring>

#include "core/bf16.hpp"

namespace st {

// acc[i] += src[i] for n elements of src in FP32 or BF16.
inline void add_into(float* acc, const void* src, DType dtype, size_t n) {
  if (dtype == DType::f32) {
    const float* s = static_cast<const float*>(src);
#pragma omp simd
    for (size_t i = 0; i < n; ++i) acc[i] += s[i];
  } else {
    const bf16* s = static_cast<const bf16*>(src);
#pragma omp simd
    for (size_t i = 0; i < n; ++i) acc[i] += bf16_to_f32(s[i]);
  }
}

// dst[i] = src[i] widened to FP32.
inline void load_f32(float* dst, const void* src, DType dtype, size_t n) {
  if (n == 0) return;  // empty buffers may be null, which memcpy must not see
  if (dtype == DType::f32)
    std::memcpy(dst, src, n * 4);
  else
    convert_bf16_to_f32(static_cast<const bf16*>(src), dst, n);
}

}  // namespace st
