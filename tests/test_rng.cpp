#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/rng.hpp"

namespace st {
namespace {

// Known-answer vectors of Philox-4x32-10 (Salmon et al., Random123 distribution).
TEST(Philox, KnownAnswers) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(
      philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
      (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(
      philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
      (std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox, ValuesDoNotDependOnHowWorkIsSplit) {
  const size_t n = 10001;
  std::vector<float> whole(n), pieces(n);
  fill_normal(whole.data(), n, 42, 5, 0, 0.f, 1.f);
  // Three uneven pieces, as three ranks with padding would draw them.
  fill_normal(pieces.data(), 3, 42, 5, 0, 0.f, 1.f);
  fill_normal(pieces.data() + 3, 5000, 42, 5, 3, 0.f, 1.f);
  fill_normal(pieces.data() + 5003, n - 5003, 42, 5, 5003, 0.f, 1.f);
  EXPECT_EQ(whole, pieces);
  EXPECT_EQ(whole[777], normal_at(42, 5, 777));
}

// fill_normal works block by block (four normals per Philox block): every element, at any
// offset and length, is exactly normal_at's value for its index, scaled and shifted.
TEST(Philox, FillNormalIsNormalAtForEveryElement) {
  for (uint64_t first : {0u, 1u, 3u, 4u, 5003u})
    for (size_t n : {size_t(1), size_t(2), size_t(7), size_t(10007)}) {
      std::vector<float> x(n);
      fill_normal(x.data(), n, 9, 4, first, 0.5f, 0.02f);
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(x[i], 0.5f + 0.02f * normal_at(9, 4, first + i)) << first << "+" << i;
    }
}

TEST(Philox, NormalSamplesHaveUnitMoments) {
  const size_t n = 1 << 20;
  std::vector<float> x(n);
  fill_normal(x.data(), n, 1, 2, 0, 0.f, 1.f);
  double mean = 0, var = 0;
  for (float v : x) mean += v;
  mean /= double(n);
  for (float v : x) var += (v - mean) * (v - mean);
  var /= double(n);
  EXPECT_NEAR(mean, 0.0, 5.0 / std::sqrt(double(n)));
  EXPECT_NEAR(var, 1.0, 0.01);
}

TEST(Philox, StreamsAndSeedsDiffer) {
  EXPECT_NE(normal_at(1, 0, 0), normal_at(1, 1, 0));
  EXPECT_NE(normal_at(1, 0, 0), normal_at(2, 0, 0));
}

}  // namespace
}  // namespace st
