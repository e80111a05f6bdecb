// BF16 conversion: every kernel against the scalar definition, and the scalar definition
// against an independent oracle (the nearest BF16 value computed in double, ties to even).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/bf16.hpp"
#include "core/cpu_features.hpp"
#include "core/rng.hpp"

namespace st {
namespace {

double bf16_value(uint32_t h) {
  if ((h & 0x7fff) == 0x7f80) return 0x1p128 * ((h & 0x8000) ? -1 : 1);  // as if unbounded
  return double(bf16_to_f32(bf16(h)));
}

// Round-to-nearest-even by comparing the two BF16 neighbours of x in double precision.
uint16_t oracle(float x) {
  const uint32_t u = f32_bits(x);
  if (std::isnan(x)) return uint16_t((u >> 16) | 0x40);
  if (std::isinf(x)) return uint16_t(u >> 16);
  const uint32_t down = u >> 16;  // toward zero
  const uint32_t up = down + 1;   // away from zero (may reach infinity)
  const double dd = std::fabs(double(x) - bf16_value(down));
  const double du = std::fabs(double(x) - bf16_value(up));
  if (dd < du) return uint16_t(down);
  if (du < dd) return uint16_t(up);
  return uint16_t((down & 1) ? up : down);
}

std::vector<Bf16Kernel> kernels() {
  std::vector<Bf16Kernel> k{Bf16Kernel::portable};
  if (cpu_features().avx512_bf16) k.push_back(Bf16Kernel::avx512_bf16);
  return k;
}

std::vector<uint16_t> convert_with(Bf16Kernel kernel, const std::vector<float>& x) {
  set_bf16_kernel(kernel);
  std::vector<uint16_t> out(x.size());
  convert_f32_to_bf16(x.data(), out.data(), x.size());
  set_bf16_kernel(Bf16Kernel::automatic);
  return out;
}

TEST(Bf16, SpecialClassesMatchOracle) {
  const std::vector<uint32_t> bits = {
      0x00000000, 0x80000000,              // signed zeros
      0x00000001, 0x80000001, 0x007fffff,  // subnormals: smallest, negative, largest
      0x00008000, 0x00018000, 0x00008001,  // subnormal exact ties (to even) and just above
      0x0000ffff, 0x807f8000,              // subnormal rounding up; negative subnormal tie
      0x00800000, 0x3f800000, 0xbf800000,  // smallest normal, +-1
      0x3f808000, 0x3f818000, 0x3f808001,  // exact ties to even (down, up), just above a tie
      0x3f80ffff, 0x7f7fffff, 0xff7fffff,  // rounds up; largest finite rounds to +-inf
      0x7f7f7fff,                          // largest finite that stays finite
      0x7f800000, 0xff800000,              // infinities
      0x7fc00000, 0xffc00000, 0x7f800001,  // quiet NaNs, signalling NaN with low payload
      0x7fa5a5a5, 0xffffffff, 0x7fbfffff,  // NaN payloads
  };
  std::vector<float> x;
  for (uint32_t b : bits) x.push_back(f32_from_bits(b));
  // Pad past one vector width so the vector loop, not only the tail, sees every value.
  while (x.size() < 64) x.push_back(x[x.size() % bits.size()]);
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(f32_to_bf16(x[i]), oracle(x[i])) << std::hex << "input 0x" << f32_bits(x[i]);
  for (Bf16Kernel k : kernels()) {
    const auto out = convert_with(k, x);
    for (size_t i = 0; i < x.size(); ++i)
      EXPECT_EQ(out[i], f32_to_bf16(x[i]))
          << bf16_kernel_name(k) << std::hex << " input 0x" << f32_bits(x[i]);
  }
}

TEST(Bf16, NanStaysNanAndZeroKeepsSign) {
  EXPECT_TRUE(std::isnan(round_to_bf16(NAN)));
  EXPECT_TRUE(std::isnan(round_to_bf16(f32_from_bits(0x7f800001))));  // would truncate to inf
  EXPECT_TRUE(std::signbit(round_to_bf16(-0.0f)));
  EXPECT_EQ(round_to_bf16(1.0f + 0x1p-8f), 1.0f);                // tie goes to even (down)
  EXPECT_EQ(round_to_bf16(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);  // tie goes to even (up)
}

TEST(Bf16, TenMillionRandomValuesMatchScalarAndOracle) {
  const size_t n = 10'000'000;
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    const auto r = random_block(7, 3, i);
    x[i] = f32_from_bits(r[0]);  // every bit pattern class: normals, subnormals, NaNs, infs
  }
  std::vector<uint16_t> scalar(n);
  size_t oracle_mismatches = 0;
  for (size_t i = 0; i < n; ++i) {
    scalar[i] = f32_to_bf16(x[i]);
    if (i % 10 == 0 && scalar[i] != oracle(x[i])) ++oracle_mismatches;
  }
  EXPECT_EQ(oracle_mismatches, 0u);
  for (Bf16Kernel k : kernels()) {
    const auto out = convert_with(k, x);
    size_t mismatches = 0;
    for (size_t i = 0; i < n; ++i) mismatches += out[i] != scalar[i];
    EXPECT_EQ(mismatches, 0u) << bf16_kernel_name(k);
  }
}

TEST(Bf16, RoundTripOfBf16ValuesIsExact) {
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = uint16_t(h);
  std::vector<float> f(65536);
  convert_bf16_to_f32(all.data(), f.data(), f.size());
  for (Bf16Kernel k : kernels()) {
    const auto back = convert_with(k, f);
    for (uint32_t h = 0; h < 65536; ++h) {
      if (std::isnan(f[h])) {
        EXPECT_EQ(back[h], uint16_t(h | 0x40)) << h;  // NaNs come back quiet
      } else {
        EXPECT_EQ(back[h], h) << h;
      }
    }
  }
}

}  // namespace
}  // namespace st
