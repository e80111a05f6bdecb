#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace st {

// Element types. bf16 values are stored as their raw 16 bits.
enum class DType : uint8_t { f32, bf16, i32, f64 };
using bf16 = uint16_t;

constexpr size_t dtype_size(DType t) {
  return t == DType::bf16 ? 2 : t == DType::f64 ? 8 : 4;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "fp32";
    case DType::bf16:
      return "bf16";
    case DType::i32:
      return "i32";
    case DType::f64:
      return "fp64";
  }
  return "?";
}

// Parses "fp32"/"f32"/"float32" and "bf16"/"bfloat16"; throws InputError naming `what`.
DType parse_float_dtype(std::string_view text, std::string_view what);

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<bf16>() {
  return DType::bf16;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::i32;
}

}  // namespace st
