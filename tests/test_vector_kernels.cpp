// The elementwise kernels' two paths (AVX2 + FMA and portable): the vector BF16 store against
// the scalar rounding bit for bit, e^x against libm, GELU and SwiGLU against FP64 references on
// both paths, and the two GELU paths against each other.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/bf16.hpp"
#include "core/cpu_features.hpp"
#include "core/ops/avx2_math.hpp"
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

// Runs each test once per elementwise path (the AVX2 one skipped on a CPU without it).
class ElementwisePath : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (!GetParam() && !has_avx2()) GTEST_SKIP() << "needs AVX2 and FMA (this CPU lacks them)";
    set_elementwise_portable(GetParam());
  }
  void TearDown() override { set_elementwise_portable(false); }
};

std::string path_name(const ::testing::TestParamInfo<bool>& info) {
  return info.param ? "portable" : "avx2";
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

INSTANTIATE_TEST_SUITE_P(Paths, ElementwisePath, ::testing::Values(false, true), path_name);

TEST(VectorMath, BothGeluPathsAgreeToAFewUlp) {
  SKIP_WITHOUT_AVX2();
  const std::vector<float> x = spread(20001, -10.f, 10.f);
  std::vector<float> fast(x.size()), portable(x.size()), d_fast(x.size(), 1.f),
      d_portable(x.size(), 1.f);
  gelu_forward(fast.data(), x.data(), x.size(), DType::f32);
  gelu_backward(d_fast.data(), d_fast.data(), x.data(), x.size(), DType::f32);
  set_elementwise_portable(true);
  gelu_forward(portable.data(), x.data(), x.size(), DType::f32);
  gelu_backward(d_portable.data(), d_portable.data(), x.data(), x.size(), DType::f32);
  set_elementwise_portable(false);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_NEAR(fast[i], portable[i], 1e-6 * std::fabs(portable[i]) + 1e-9) << "x = " << x[i];
    ASSERT_NEAR(d_fast[i], d_portable[i], 1e-6 * (std::fabs(d_portable[i]) + 1)) << "x = " << x[i];
  }
}

}  // namespace
}  // namespace st
