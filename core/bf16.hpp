#pragma once
// FP32 <-> BF16 conversion. FP32 -> BF16 rounds to nearest, ties to even, keeps subnormals
// (no flush to zero) and keeps NaN a NaN (sign and top payload bits kept, quiet bit set).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/dtype.hpp"

namespace st {

inline uint32_t f32_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

inline float f32_from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// The scalar definition every vector path must reproduce bit for bit.
inline bf16 f32_to_bf16(float x) {
  const uint32_t u = f32_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16((u >> 16) | 0x0040u);  // NaN: make it quiet
  const uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);
  return bf16((u + rounding_bias) >> 16);
}

inline float bf16_to_f32(bf16 h) {
  return f32_from_bits(uint32_t(h) << 16);
}

// Rounds an FP32 value through BF16 and back.
inline float round_to_bf16(float x) {
  return bf16_to_f32(f32_to_bf16(x));
}

enum class Bf16Kernel { automatic, portable, avx512_bf16 };

// Bulk conversions; large arrays are split over the OpenMP threads.
void convert_f32_to_bf16(const float* src, bf16* dst, size_t n);
void convert_bf16_to_f32(const bf16* src, float* dst, size_t n);

// Which kernel convert_f32_to_bf16 uses; `automatic` picks AVX512-BF16 when the CPU has it.
void set_bf16_kernel(Bf16Kernel kernel);
Bf16Kernel active_bf16_kernel();
const char* bf16_kernel_name(Bf16Kernel kernel);

}  // namespace st
