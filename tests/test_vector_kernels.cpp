// The elementwise kernels' tiers (AVX-512F, AVX2 + FMA and portable): the vector BF16 stores
// against the scalar rounding bit for bit, e^x against libm, GELU and SwiGLU against FP64
// references on every tier, the AVX-512 and AVX2 kernels against each other bit for bit, the
// vector and portable GELU to a few ulp, and the residual add against its definition.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "core/bf16.hpp"
#include "core/cpu_features.hpp"
#include "core/ops/avx2_math.hpp"
#include "core/ops/avx512_math.hpp"
#include "core/ops/elementwise.hpp"
#include "core/ops/gelu.hpp"
#include "core/ops/swiglu.hpp"

namespace st {
namespace {

bool has_avx2() {
  return cpu_features().avx2 && cpu_features().fma;
}

#define SKIP_WITHOUT_AVX2() \
  if (!has_avx2()) GTEST_SKIP() << "needs AVX2 and FMA (this CPU lacks them)"

ST_AVX2_FN void store_all(bf16* out, const float* in, size_t n) {
  for (size_t i = 0; i < n; i += 8) avx2::store8(out + i, avx2::load8(in + i));
}

ST_AVX512_FN void store16_all(bf16* out, const float* in, size_t n) {
  for (size_t i = 0; i + 16 <= n; i += 16) avx512::store16(out + i, avx512::load16(in + i));
}

ST_AVX2_FN void exp_all(float* out, const float* in, size_t n) {
  for (size_t i = 0; i < n; i += 8) avx2::store8(out + i, avx2::exp8(avx2::load8(in + i)));
}

TEST(VectorMath, Bf16StoreRoundsLikeTheScalarDefinition) {
  SKIP_WITHOUT_AVX2();
  std::vector<float> x = {0.f,
                          -0.f,
                          1.f,
                          -1.f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(),
                          f32_from_bits(0x7fffffffu),  // NaN whose rounding would carry
                          f32_from_bits(0xff800001u),  // signalling NaN, negative
                          f32_from_bits(0x00000001u),  // smallest subnormal
                          f32_from_bits(0x3f808000u),  // a tie, rounds to even (down)
                          f32_from_bits(0x3f818000u),  // a tie, rounds to even (up)
                          f32_from_bits(0x7f7fffffu),  // largest finite: rounds to infinity
                          f32_from_bits(0x007fffffu)};
  std::mt19937 gen(7);
  while (x.size() < (1u << 20)) x.push_back(f32_from_bits(uint32_t(gen())));
  std::vector<bf16> vec(x.size());
  store_all(vec.data(), x.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(vec[i], f32_to_bf16(x[i])) << fmt::format("input bits {:#010x}", f32_bits(x[i]));
}

TEST(VectorMath, ExpMatchesLibmWithinItsBound) {
  SKIP_WITHOUT_AVX2();
  std::vector<float> x;
  for (float v = -87.0f; v <= 88.0f; v += 0.01171875f) x.push_back(v);
  while (x.size() % 8) x.push_back(0.f);
  std::vector<float> y(x.size());
  exp_all(y.data(), x.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = std::exp(double(x[i]));
    ASSERT_NEAR(y[i], want, 4e-7 * want) << "x = " << x[i];
  }
}

// GELU's tanh form in FP64.
double gelu_reference(double x) {
  const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(u));
}

double gelu_grad_reference(double x) {
  const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  const double th = std::tanh(u);
  return 0.5 * (1.0 + th) +
         0.5 * x * (1.0 - th * th) * std::sqrt(2.0 / M_PI) * (1.0 + 3.0 * 0.044715 * x * x);
}

std::vector<float> spread(size_t n, float lo, float hi) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = lo + (hi - lo) * float(i) / float(n - 1);
  return x;
}

// Runs each test once per elementwise tier (one the CPU lacks is skipped, naming it).
class ElementwisePath : public ::testing::TestWithParam<VectorTier> {
 protected:
  void SetUp() override {
    if (GetParam() == VectorTier::avx512 && best_elementwise_tier() < VectorTier::avx512)
      GTEST_SKIP() << "needs AVX-512F (this CPU lacks it)";
    if (GetParam() == VectorTier::avx2 && !has_avx2())
      GTEST_SKIP() << "needs AVX2 and FMA (this CPU lacks them)";
    set_elementwise_cap(GetParam());
  }
  void TearDown() override { set_elementwise_cap(VectorTier::avx512); }
};

std::string path_name(const ::testing::TestParamInfo<VectorTier>& info) {
  return info.param == VectorTier::avx512 ? "avx512"
         : info.param == VectorTier::avx2 ? "avx2"
                                          : "portable";
}

TEST_P(ElementwisePath, GeluAndItsGradientMatchFp64) {
  const std::vector<float> x = spread(4001, -12.f, 12.f);
  std::vector<float> y(x.size()), d(x.size(), 1.0f);
  gelu_forward(y.data(), x.data(), x.size(), DType::f32);
  gelu_backward(d.data(), d.data(), x.data(), x.size(), DType::f32);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_NEAR(y[i], gelu_reference(x[i]), 2e-6 * (1 + std::fabs(x[i]))) << "x = " << x[i];
    ASSERT_NEAR(d[i], gelu_grad_reference(x[i]), 4e-6 * (1 + std::fabs(x[i]))) << "x = " << x[i];
  }
  // A NaN stays a NaN on both passes; far tails are exact.
  const float in[3] = {std::numeric_limits<float>::quiet_NaN(), 100.f, -100.f};
  float out[3], grad[3] = {1, 1, 1};
  gelu_forward(out, in, 3, DType::f32);
  gelu_backward(grad, grad, in, 3, DType::f32);
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_TRUE(std::isnan(grad[0]));
  EXPECT_EQ(out[1], 100.f);
  EXPECT_EQ(grad[1], 1.f);
  EXPECT_NEAR(out[2], 0.f, 1e-30);
  EXPECT_NEAR(grad[2], 0.f, 1e-30);
}

TEST_P(ElementwisePath, GeluOfARowDoesNotDependOnWhereTheRowEnds) {
  const std::vector<float> x = spread(37, -4.f, 4.f);
  std::vector<float> whole(x.size()), one(1);
  gelu_row(whole.data(), x.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    gelu_row(one.data(), &x[i], 1);
    ASSERT_EQ(f32_bits(one[0]), f32_bits(whole[i])) << "element " << i;
  }
}

TEST_P(ElementwisePath, Bf16GeluIsTheFp32ResultRounded) {
  std::vector<float> x = spread(1003, -8.f, 8.f);
  for (float& v : x) v = round_to_bf16(v);
  std::vector<bf16> xb(x.size()), yb(x.size());
  convert_f32_to_bf16(x.data(), xb.data(), x.size());
  std::vector<float> y(x.size());
  gelu_forward(y.data(), x.data(), x.size(), DType::f32);
  gelu_forward(yb.data(), xb.data(), x.size(), DType::bf16);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(yb[i], f32_to_bf16(y[i])) << "x = " << x[i];
}

// An output gradient the matmul already rounded to BF16 is read as its exact FP32 value: the
// same bits as the FP32 row holding those values (a tail that is not a whole vector included).
TEST_P(ElementwisePath, GeluGradientOfABf16OutputGradientIsItsFp32ValueTimesTheSlope) {
  std::vector<float> pre = spread(1003, -8.f, 8.f), d = spread(1003, 3.f, -2.f);
  for (float& v : pre) v = round_to_bf16(v);
  for (float& v : d) v = round_to_bf16(v);
  std::vector<bf16> pre_b(pre.size()), d_b(d.size());
  convert_f32_to_bf16(pre.data(), pre_b.data(), pre.size());
  convert_f32_to_bf16(d.data(), d_b.data(), d.size());
  std::vector<float> from_f32(d.size()), from_bf16(d.size());
  gelu_grad_row(from_f32.data(), d.data(), pre_b.data(), int64_t(d.size()));
  gelu_grad_row(from_bf16.data(), d_b.data(), pre_b.data(), int64_t(d.size()));
  for (size_t i = 0; i < d.size(); ++i)
    ASSERT_EQ(f32_bits(from_bf16[i]), f32_bits(from_f32[i])) << "element " << i;
}

// SwiGLU's backward from an output gradient already in BF16: the FP32 path's bits for the
// same values.
TEST_P(ElementwisePath, SwigluGradientOfABf16OutputGradientIsTheFp32PathsOnItsValue) {
  const int64_t M = 3, F = 21;  // the tail too
  std::vector<float> gate_up = spread(size_t(M * 2 * F), -9.f, 7.f), dy(size_t(M * F));
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = round_to_bf16(0.5f - 0.03f * float(i));
  for (float& v : gate_up) v = round_to_bf16(v);
  std::vector<bf16> gate_up_b(gate_up.size()), dy_b(dy.size());
  convert_f32_to_bf16(gate_up.data(), gate_up_b.data(), gate_up.size());
  convert_f32_to_bf16(dy.data(), dy_b.data(), dy.size());
  std::vector<bf16> from_f32(gate_up.size()), from_bf16(gate_up.size());
  swiglu_backward(from_f32.data(), dy.data(), gate_up_b.data(), M, F, DType::bf16);
  swiglu_backward(from_bf16.data(), dy_b.data(), gate_up_b.data(), M, F, DType::bf16, DType::bf16);
  EXPECT_EQ(from_bf16, from_f32);
}

TEST_P(ElementwisePath, SwigluAndItsGradientMatchFp64) {
  const int64_t M = 3, F = 21;  // F not a multiple of 8: the tail is covered
  const std::vector<float> gate_up = spread(size_t(M * 2 * F), -9.f, 7.f);
  std::vector<float> dy(size_t(M * F)), y(size_t(M * F)), d(size_t(M * 2 * F));
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = 0.5f - 0.03f * float(i);
  swiglu_forward(y.data(), gate_up.data(), M, F, DType::f32);
  swiglu_backward(d.data(), dy.data(), gate_up.data(), M, F, DType::f32);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t c = 0; c < F; ++c) {
      const double g = gate_up[size_t(i * 2 * F + c)], u = gate_up[size_t(i * 2 * F + F + c)];
      const double s = 1.0 / (1.0 + std::exp(-g)), up = dy[size_t(i * F + c)];
      const double want_y = g * s * u, want_dg = up * u * s * (1 + g * (1 - s)),
                   want_du = up * g * s;
      ASSERT_NEAR(y[size_t(i * F + c)], want_y, 2e-6 * (1 + std::fabs(want_y)));
      ASSERT_NEAR(d[size_t(i * 2 * F + c)], want_dg, 2e-6 * (1 + std::fabs(want_dg)));
      ASSERT_NEAR(d[size_t(i * 2 * F + F + c)], want_du, 2e-6 * (1 + std::fabs(want_du)));
    }
}

TEST_P(ElementwisePath, ResidualAddIsTheSumOfTheWidenedValues) {
  const size_t n = 70001;  // above the threshold where the loop is split over threads
  std::vector<float> x(n), out(n);
  std::vector<bf16> yb(n);
  std::mt19937 gen(3);
  std::normal_distribution<float> normal(0.f, 3.f);
  for (size_t i = 0; i < n; ++i) {
    x[i] = normal(gen);
    yb[i] = f32_to_bf16(normal(gen));
  }
  residual_add(out.data(), x.data(), yb.data(), DType::bf16, n);
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(f32_bits(out[i]), f32_bits(x[i] + bf16_to_f32(yb[i]))) << "element " << i;
  std::vector<float> y(n), in_place = x;
  for (size_t i = 0; i < n; ++i) y[i] = normal(gen);
  residual_add(in_place.data(), in_place.data(), y.data(), DType::f32, n);  // out is x
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(f32_bits(in_place[i]), f32_bits(x[i] + y[i])) << "element " << i;
}

INSTANTIATE_TEST_SUITE_P(Paths, ElementwisePath,
                         ::testing::Values(VectorTier::avx512, VectorTier::avx2,
                                           VectorTier::portable),
                         path_name);

TEST(VectorMath, BothGeluPathsAgreeToAFewUlp) {
  SKIP_WITHOUT_AVX2();
  const std::vector<float> x = spread(20001, -10.f, 10.f);
  std::vector<float> fast(x.size()), portable(x.size()), d_fast(x.size(), 1.f),
      d_portable(x.size(), 1.f);
  gelu_forward(fast.data(), x.data(), x.size(), DType::f32);
  gelu_backward(d_fast.data(), d_fast.data(), x.data(), x.size(), DType::f32);
  set_elementwise_cap(VectorTier::portable);
  gelu_forward(portable.data(), x.data(), x.size(), DType::f32);
  gelu_backward(d_portable.data(), d_portable.data(), x.data(), x.size(), DType::f32);
  set_elementwise_cap(VectorTier::avx512);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_NEAR(fast[i], portable[i], 1e-6 * std::fabs(portable[i]) + 1e-9) << "x = " << x[i];
    ASSERT_NEAR(d_fast[i], d_portable[i], 1e-6 * (std::fabs(d_portable[i]) + 1)) << "x = " << x[i];
  }
}

// The inputs the bit-for-bit comparison runs on: a spread, random values, the tails, NaN.
std::vector<float> awkward_values(size_t n) {
  std::vector<float> x = spread(n, -20.f, 20.f);
  std::mt19937 gen(11);
  std::normal_distribution<float> normal(0.f, 2.f);
  for (size_t i = 0; i < n; ++i) x.push_back(normal(gen));
  for (float v :
       {0.f, -0.f, 100.f, -100.f, 1e-30f, -1e-30f, std::numeric_limits<float>::quiet_NaN(),
        std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()})
    x.push_back(v);
  return x;
}

// Every output of GELU, its gradient and SwiGLU's pair, FP32 and BF16, on the active tier.
std::vector<uint32_t> all_outputs(const std::vector<float>& x) {
  const size_t n = x.size();
  std::vector<uint32_t> bits;
  auto keep = [&](const auto& v) {
    for (auto e : v) {
      if constexpr (std::is_same_v<decltype(e), float>)
        bits.push_back(f32_bits(e));
      else
        bits.push_back(uint32_t(e));
    }
  };
  std::vector<float> y(n), d(n, 0.75f);
  gelu_forward(y.data(), x.data(), n, DType::f32);
  gelu_backward(d.data(), d.data(), x.data(), n, DType::f32);
  keep(y), keep(d);
  std::vector<bf16> xb(n), yb(n);
  for (size_t i = 0; i < n; ++i) xb[i] = f32_to_bf16(x[i]);
  std::vector<float> db(n, -1.25f);
  gelu_forward(yb.data(), xb.data(), n, DType::bf16);
  gelu_backward(db.data(), db.data(), xb.data(), n, DType::bf16);
  keep(yb), keep(db);
  const int64_t F = 37, M = int64_t(n) / (2 * F);  // F: two vectors of sixteen and a tail
  std::vector<float> sy(size_t(M * F)), sd(size_t(M * 2 * F)), dy(size_t(M * F));
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = x[(i * 7) % n];
  swiglu_forward(sy.data(), x.data(), M, F, DType::f32);
  swiglu_backward(sd.data(), dy.data(), x.data(), M, F, DType::f32);
  keep(sy), keep(sd);
  std::vector<bf16> syb(size_t(M * F)), sdb(size_t(M * 2 * F));
  swiglu_forward(syb.data(), xb.data(), M, F, DType::bf16);
  swiglu_backward(sdb.data(), dy.data(), xb.data(), M, F, DType::bf16);
  keep(syb), keep(sdb);
  return bits;
}

TEST(VectorMath, Avx512KernelsGiveTheAvx2ResultsBitForBit) {
  if (best_elementwise_tier() < VectorTier::avx512)
    GTEST_SKIP() << "needs AVX-512F (this CPU lacks it)";
  const std::vector<float> x = awkward_values(4099);
  set_elementwise_cap(VectorTier::avx2);
  const std::vector<uint32_t> avx2 = all_outputs(x);
  set_elementwise_cap(VectorTier::avx512);
  const std::vector<uint32_t> avx512 = all_outputs(x);
  ASSERT_EQ(avx2.size(), avx512.size());
  for (size_t i = 0; i < avx2.size(); ++i)
    ASSERT_EQ(avx2[i], avx512[i]) << fmt::format("output {} of {}", i, avx2.size());
}

TEST(VectorMath, Avx512Bf16StoreRoundsLikeTheScalarDefinition) {
  if (best_elementwise_tier() < VectorTier::avx512)
    GTEST_SKIP() << "needs AVX-512F (this CPU lacks it)";
  std::vector<float> x = awkward_values(16);
  x.push_back(f32_from_bits(0x7fffffffu));
  x.push_back(f32_from_bits(0x3f808000u));
  x.push_back(f32_from_bits(0x3f818000u));
  x.push_back(f32_from_bits(0x7f7fffffu));
  std::mt19937 gen(5);
  while (x.size() < (1u << 20)) x.push_back(f32_from_bits(uint32_t(gen())));
  std::vector<bf16> vec(x.size());
  store16_all(vec.data(), x.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(vec[i], f32_to_bf16(x[i])) << fmt::format("input bits {:#010x}", f32_bits(x[i]));
}

}  // namespace
}  // namespace st
