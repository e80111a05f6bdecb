// Blockwise INT8/INT4 quantization (core/ops/quantize): hand-computed encodings, the error bound
// against FP64, non-finite blocks, partial blocks and accumulation on arrival.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/bf16.hpp"
#include "core/ops/quantize.hpp"
#include "core/rng.hpp"

namespace st {
namespace {

std::vector<float> roundtrip(Quantization q, const std::vector<float>& x) {
  std::vector<uint8_t> code(quantized_bytes(q, int64_t(x.size())));
  quantize_blocks(q, x.data(), int64_t(x.size()), code.data());
  std::vector<float> y(x.size());
  dequantize_blocks(q, code.data(), int64_t(x.size()), y.data(), DType::f32);
  return y;
}

TEST(Quantize, BytesCountScalesAndValuesRoundedToEight) {
  EXPECT_EQ(quantized_bytes(Quantization::int8, 256), 4u + 256u + 4u);  // 264
  EXPECT_EQ(quantized_bytes(Quantization::int8, 257), 8u + 257u + 7u);  // 272
  EXPECT_EQ(quantized_bytes(Quantization::int4, 128), 4u + 64u + 4u);   // 72
  EXPECT_EQ(quantized_bytes(Quantization::int4, 129), 8u + 65u + 7u);   // 80
  EXPECT_EQ(quantized_bytes(Quantization::int8, 0), 0u);
}

TEST(Quantize, HandComputedInt8Block) {
  // amax 2.54: scale 0.02; 1.0 -> 50, -2.54 -> -127, 0.011 -> 0.55 -> 1, 0.01 -> 0.5 -> 0 (even).
  const std::vector<float> x = {1.0f, -2.54f, 0.011f, 0.01f};
  std::vector<uint8_t> code(quantized_bytes(Quantization::int8, 4));
  quantize_blocks(Quantization::int8, x.data(), 4, code.data());
  float scale;
  std::memcpy(&scale, code.data(), 4);
  EXPECT_FLOAT_EQ(scale, 2.54f / 127);
  const int8_t* v = reinterpret_cast<const int8_t*>(code.data() + 4);
  EXPECT_EQ(v[0], 50);
  EXPECT_EQ(v[1], -127);
  EXPECT_EQ(v[2], 1);
  EXPECT_EQ(v[3], 0);
  const std::vector<float> y = roundtrip(Quantization::int8, x);
  EXPECT_FLOAT_EQ(y[1], -2.54f);
  EXPECT_FLOAT_EQ(y[0], 50 * scale);
}

TEST(Quantize, HandComputedInt4Nibbles) {
  // amax 7: scale 1; values -7..7 stored as q + 8, the first of each pair in the low nibble.
  const std::vector<float> x = {7, -7, 0, 2.6f, -1.4f};
  std::vector<uint8_t> code(quantized_bytes(Quantization::int4, 5));
  quantize_blocks(Quantization::int4, x.data(), 5, code.data());
  const uint8_t* v = code.data() + 4;
  EXPECT_EQ(v[0], (15) | (1 << 4));
  EXPECT_EQ(v[1], (8) | (11 << 4));
  EXPECT_EQ(v[2], 7);  // -1 + 8, high nibble unused
  const std::vector<float> y = roundtrip(Quantization::int4, x);
  EXPECT_EQ(y, (std::vector<float>{7, -7, 0, 3, -1}));
}

TEST(Quantize, ErrorWithinHalfAStepOfEachBlock) {
  for (Quantization q : {Quantization::int8, Quantization::int4}) {
    const int64_t n = 5 * quant_block(q) + 37;  // a partial last block
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)  // magnitudes that differ by block
      x[size_t(i)] = normal_at(7, 0, uint64_t(i)) * std::pow(10.0f, float(i / quant_block(q)) - 3);
    const std::vector<float> y = roundtrip(q, x);
    const double levels = q == Quantization::int8 ? 127 : 7;
    for (int64_t b = 0; b * quant_block(q) < n; ++b) {
      const int64_t first = b * quant_block(q), last = std::min(n, first + quant_block(q));
      double amax = 0;
      for (int64_t i = first; i < last; ++i) amax = std::max(amax, std::fabs(double(x[size_t(i)])));
      for (int64_t i = first; i < last; ++i)
        ASSERT_LE(std::fabs(double(y[size_t(i)]) - double(x[size_t(i)])),
                  amax / levels * (0.5 + 1e-5))
            << quantization_name(q) << " element " << i;
    }
  }
}

TEST(Quantize, NonFiniteBlockDecodesToNaNOthersUntouched) {
  for (Quantization q : {Quantization::int8, Quantization::int4}) {
    const int64_t b = quant_block(q);
    for (float bad :
         {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
      std::vector<float> x(size_t(2 * b), 0.5f);
      x[size_t(b + 3)] = bad;
      const std::vector<float> y = roundtrip(q, x);
      for (int64_t i = 0; i < b; ++i) ASSERT_FLOAT_EQ(y[size_t(i)], 0.5f);
      for (int64_t i = b; i < 2 * b; ++i) ASSERT_TRUE(std::isnan(y[size_t(i)])) << i;
    }
  }
}

TEST(Quantize, ZeroAndTinyBlocksDecodeToZero) {
  for (Quantization q : {Quantization::int8, Quantization::int4})
    for (float tiny : {0.0f, 1e-39f, -3e-45f}) {  // subnormal: 1 / scale would overflow
      const std::vector<float> y = roundtrip(q, std::vector<float>(301, tiny));
      for (float v : y) ASSERT_EQ(f32_bits(v), 0u) << quantization_name(q) << " " << tiny;
    }
}

TEST(Quantize, Bf16OutputIsTheRoundedFp32AndAddAccumulates) {
  const int64_t n = 1000;
  std::vector<float> x(static_cast<size_t>(n));
  fill_normal(x.data(), x.size(), 3, 0, 0, 0.0f, 1.0f);
  std::vector<uint8_t> code(quantized_bytes(Quantization::int8, n));
  quantize_blocks(Quantization::int8, x.data(), n, code.data());
  std::vector<float> f(static_cast<size_t>(n));
  std::vector<bf16> h(static_cast<size_t>(n));
  dequantize_blocks(Quantization::int8, code.data(), n, f.data(), DType::f32);
  dequantize_blocks(Quantization::int8, code.data(), n, h.data(), DType::bf16);
  std::vector<float> acc(size_t(n), 1.0f);
  dequantize_add(Quantization::int8, code.data(), n, acc.data());
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(h[size_t(i)], f32_to_bf16(f[size_t(i)]));
    ASSERT_EQ(acc[size_t(i)], 1.0f + f[size_t(i)]);
  }
}

}  // namespace
}  // namespace st
