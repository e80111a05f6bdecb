#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace st {

// Element types. bf16 values are stored as their raw 16 bits.
// i64/u64 carry sizes, counts and hashes between ranks.
// u8 is raw bytes (one allocation carved into tensors of other dtypes).
enum class DType : uint8_t { f32, bf16, i32, f64, i64, u64, u8 };
using bf16 = uint16_t;

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::u8:
      return 1;
    case DType::bf16:
      return 2;
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::f64:
    case DType::i64:
    case DType::u64:
      return 8;
  }
  return 0;
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
    case DType::i64:
      return "i64";
    case DType::u64:
      return "u64";
    case DType::u8:
      return "u8";
  }
  return "?";
}

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
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::i64;
}
template <>
constexpr DType dtype_of<uint64_t>() {
  return DType::u64;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::u8;
}

}  // namespace st
