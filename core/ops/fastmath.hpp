#pragma once
// exp and tanh written so that the compiler vectorizes loops that call them (libm's are
// opaque calls). Relative error of fast_exp is below 3e-7 over the clamped range.
#include <bit>
#include <cstdint>
#include <limits>

namespace st {

inline float fast_exp(float x) {
  // NaN is clamped like -inf (so the conversion to int below is defined) and returned as NaN.
  const bool nan = x != x;
  x = x > -87.0f ? (x < 88.0f ? x : 88.0f) : -87.0f;
  // x = n ln2 + r, |r| <= ln2 / 2, then e^x = 2^n e^r with e^r from a degree-6 polynomial.
  // Round to nearest with the 1.5 * 2^23 trick (vectorizes, unlike roundeven).
  const float n = (x * 1.4426950408889634f + 12582912.0f) - 12582912.0f;
  const float r = x - n * 0.693145751953125f - n * 1.428606765330187e-06f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (int32_t(n) + 127) << 23;
  return nan ? std::numeric_limits<float>::quiet_NaN() : p * std::bit_cast<float>(bits);
}

inline float fast_tanh(float x) {
  const float c = x < -9.0f ? -9.0f : (x > 9.0f ? 9.0f : x);
  const float e = fast_exp(2.0f * c);
  return (e - 1.0f) / (e + 1.0f);
}

}  // namespace st
