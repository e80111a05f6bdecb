// Llama's ops against independent references: central finite differences of their forwards,
// and direct double-precision formulas (Hugging Face's rotate_half, expanded kv heads).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <span>
#include <vector>

#include "core/bf16.hpp"
#include "core/error.hpp"
#include "core/ops/attention.hpp"
#include "core/ops/head_norm.hpp"
#include "core/ops/linear.hpp"
#include "core/ops/rmsnorm.hpp"
#include "core/ops/rope.hpp"
#include "core/ops/swiglu.hpp"
#include "tests/grad_check.hpp"

namespace st {
namespace {

using testing::dot;
using testing::expect_gradient;
using testing::f32;
using testing::randn;

TEST(LlamaOps, RmsNormMatchesFormulaAndFiniteDifferences) {
  const int64_t M = 4, C = 9;
  const float eps = 1e-5f;
  auto x = randn(size_t(M * C), 1), w = randn(size_t(C), 2), r = randn(size_t(M * C), 3);
  std::vector<float> out(x.size()), rstd(static_cast<size_t>(M));
  auto loss = [&] {
    rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), M, C, eps, f32);
    return dot(out.data(), r);
  };
  loss();
  for (int64_t i = 0; i < M; ++i) {
    double squares = 0;
    for (int64_t c = 0; c < C; ++c) squares += double(x[i * C + c]) * x[i * C + c];
    const double s = 1.0 / std::sqrt(squares / double(C) + eps);
    for (int64_t c = 0; c < C; ++c)
      EXPECT_NEAR(out[i * C + c], x[i * C + c] * s * w[c], 1e-5) << i << "," << c;
  }
  std::vector<float> dx(x.size(), 0.f), dw(w.size(), 0.f);
  rmsnorm_backward(dx.data(), dw.data(), r.data(), x.data(), w.data(), rstd.data(), M, C, f32);
  expect_gradient("rmsnorm d_x", x, dx, loss, 1e-2f, 3e-3, 3e-2);
  expect_gradient("rmsnorm d_weight", w, dw, loss);
}

// Hugging Face's formula in double: q·cos + rotate_half(q)·sin, rotate_half(q) = [−q₂, q₁].
TEST(LlamaOps, RopeMatchesRotateHalfAndInvertsInBackward) {
  const int64_t B = 2, T = 5, heads = 3, hs = 8, stride = heads * hs + 4;  // 4 columns untouched
  const double theta = 10000.0;
  const RopeTable table = rope_table(T, hs, theta);
  auto x = randn(size_t(B * T * stride), 1);
  std::vector<float> y = x;
  rope_forward(y.data(), B, T, heads, stride, table, f32);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < hs; ++i) {
          const int64_t half = hs / 2, k = i % half;
          const double angle = double(t) / std::pow(theta, double(2 * k) / double(hs));
          const float* head = x.data() + (b * T + t) * stride + h * hs;
          const double rotated = i < half ? -double(head[i + half]) : double(head[i - half]);
          EXPECT_NEAR(y[size_t((b * T + t) * stride + h * hs + i)],
                      head[i] * std::cos(angle) + rotated * std::sin(angle), 1e-5);
        }
  for (int64_t row = 0; row < B * T; ++row)  // the columns after the heads are left alone
    for (int64_t c = heads * hs; c < stride; ++c)
      EXPECT_EQ(y[size_t(row * stride + c)], x[size_t(row * stride + c)]);
  auto r = randn(x.size(), 2);
  std::vector<float> out(x.size());
  auto loss = [&] {
    out = x;
    rope_forward(out.data(), B, T, heads, stride, table, f32);
    return dot(out.data(), r);
  };
  std::vector<float> dx = r;
  rope_backward(dx.data(), dx.data(), B, T, heads, stride, table, f32);  // in place
  expect_gradient("rope d_x", x, dx, loss, 1e-2f, 1e-3, 1e-3);
  std::vector<float> out_of_place(r.size(), NAN);
  rope_backward(out_of_place.data(), r.data(), B, T, heads, stride, table, f32);
  EXPECT_EQ(out_of_place, dx);  // the columns after the heads copied
}

TEST(LlamaOps, SwigluMatchesFormulaAndFiniteDifferences) {
  const int64_t M = 3, F = 7;
  auto gu = randn(size_t(M * 2 * F), 1, 2.0f), r = randn(size_t(M * F), 2);
  std::vector<float> out(size_t(M * F));
  auto loss = [&] {
    swiglu_forward(out.data(), gu.data(), M, F, f32);
    return dot(out.data(), r);
  };
  loss();
  for (int64_t i = 0; i < M; ++i)
    for (int64_t c = 0; c < F; ++c) {
      const double g = gu[i * 2 * F + c], u = gu[i * 2 * F + F + c];
      EXPECT_NEAR(out[i * F + c], g / (1.0 + std::exp(-g)) * u, 1e-5);
    }
  std::vector<float> d(gu.size(), NAN);
  swiglu_backward(d.data(), r.data(), gu.data(), M, F, f32);
  expect_gradient("swiglu d_gate_up", gu, d, loss, 1e-3f, 1e-3, 1e-2);
}

// Two nn.Linear layers ([out, in] weights) writing side by side, as q/k/v or gate/up do; with
// `bias`, the first carries one (as Qwen2's q, k and v do): added to its columns, and d_bias its
// column sums. Against the separate layers in double and finite differences. `adjacent`: the
// second's weights, gradients (and bias) right after the first's in one buffer, as a family
// declares them, so the forward and the weight gradient run as one wide matmul.
void check_fused_linear(bool bias, bool adjacent = false) {
  const int64_t M = 5, K = 6, N0 = 4, N1 = 3, W = N0 + N1;
  auto x = randn(size_t(M * K), 1), w01 = randn(size_t(W * K), 2);
  auto r = randn(size_t(M * W), 4), b01 = randn(size_t(W), 5);
  std::vector<float> w0(w01.begin(), w01.begin() + N0 * K), w1(w01.begin() + N0 * K, w01.end());
  std::vector<float> b0(b01.begin(), b01.begin() + N0), b1(b01.begin() + N0, b01.end());
  std::vector<float> dw01(w01.size(), 0.f), db01(b01.size(), 0.f);
  std::vector<float> dw0(w0.size(), 0.f), dw1(w1.size(), 0.f), db0(b0.size(), 0.f);
  const LinearPart separate[] = {
      {w0.data(), dw0.data(), N0, bias ? b0.data() : nullptr, bias ? db0.data() : nullptr},
      {w1.data(), dw1.data(), N1}};
  const LinearPart together[] = {
      {w01.data(), dw01.data(), N0, bias ? b01.data() : nullptr, bias ? db01.data() : nullptr},
      {w01.data() + N0 * K, dw01.data() + N0 * K, N1, bias ? b01.data() + N0 : nullptr,
       bias ? db01.data() + N0 : nullptr}};
  const std::span<const LinearPart> parts =
      adjacent ? std::span<const LinearPart>(together) : std::span<const LinearPart>(separate);
  const bool bias1 = bias && adjacent;  // the second part biased too
  std::vector<float> out(size_t(M * W));
  auto loss = [&] {
    fused_linear_forward(out.data(), x.data(), parts, M, K, f32);
    return dot(out.data(), r);
  };
  loss();
  for (int64_t i = 0; i < M; ++i)
    for (int64_t n = 0; n < W; ++n) {
      const float* w = n < N0 ? w0.data() + n * K : w1.data() + (n - N0) * K;
      double s = bias && n < N0 ? b0[size_t(n)] : bias1 ? b1[size_t(n - N0)] : 0.0;
      for (int64_t k = 0; k < K; ++k) s += double(x[i * K + k]) * w[k];
      EXPECT_NEAR(out[i * W + n], s, 1e-5) << i << "," << n;
    }
  std::vector<float> dx(x.size(), NAN);
  fused_linear_backward(dx.data(), r.data(), nullptr, x.data(), parts, M, K, f32);
  expect_gradient("fused linear d_in", x, dx, loss);
  if (adjacent) {
    expect_gradient("fused linear d_weight 0 and 1", w01, dw01, loss);
    if (bias) expect_gradient("fused linear d_bias 0 and 1", b01, db01, loss);
    return;
  }
  expect_gradient("fused linear d_weight 0", w0, dw0, loss);
  expect_gradient("fused linear d_weight 1", w1, dw1, loss);
  if (bias) expect_gradient("fused linear d_bias 0", b0, db0, loss);
}

TEST(LlamaOps, FusedLinearMatchesSeparateLayersAndFiniteDifferences) {
  check_fused_linear(false);
}

TEST(LlamaOps, FusedLinearBiasesMatchFiniteDifferences) {
  check_fused_linear(true);
}

TEST(LlamaOps, AdjacentPartsRunAsOneMatmulWithTheSameResults) {
  check_fused_linear(false, true);
  check_fused_linear(true, true);
}

// The down projection's d_in in BF16 (it only feeds SwiGLU's backward) is the FP32 d_in rounded
// once; more than one part would round a running sum, and is refused.
TEST(LlamaOps, OnePartsDinInBf16IsTheFp32OneRounded) {
  const int64_t M = 21, K = 48, N = 32;
  const DType bf = DType::bf16;
  auto to_bf16 = [](const std::vector<float>& v) {
    std::vector<bf16> out(v.size());
    convert_f32_to_bf16(v.data(), out.data(), v.size());
    return out;
  };
  const auto x = to_bf16(randn(size_t(M * K), 1)), w = to_bf16(randn(size_t(N * K), 2));
  const auto d = randn(size_t(M * N), 3);
  std::vector<float> dw(size_t(N * K), 0.f), dx(size_t(M * K));
  std::vector<bf16> scratch(size_t(M * N)), dx_b(dx.size());
  const LinearPart part[] = {{w.data(), dw.data(), N}};
  fused_linear_backward(dx.data(), d.data(), scratch.data(), x.data(), part, M, K, bf);
  fused_linear_backward(dx_b.data(), d.data(), scratch.data(), x.data(), part, M, K, bf, bf);
  for (size_t i = 0; i < dx.size(); ++i) ASSERT_EQ(dx_b[i], f32_to_bf16(dx[i])) << "element " << i;
  const LinearPart two[] = {{w.data(), dw.data(), N / 2}, {w.data(), dw.data(), N / 2}};
  EXPECT_THROW(
      fused_linear_backward(dx_b.data(), d.data(), scratch.data(), x.data(), two, M, K, bf, bf),
      Error);
}

// Qwen3's q/k norm: each head of the chosen ones normalized alone, one weight for all of them;
// the columns around them untouched forward and backward.
TEST(LlamaOps, HeadRmsNormMatchesFormulaAndFiniteDifferences) {
  const int64_t M = 3, hs = 4, first = 1, heads = 2, W = 4 * hs + 3;
  const float eps = 1e-6f;
  const auto x0 = randn(size_t(M * W), 1);
  auto w = randn(size_t(hs), 2), r = randn(size_t(M * W), 3), x = x0;
  std::vector<float> y(x.size()), saved(size_t(M * heads * hs)), rstd(size_t(M * heads));
  auto loss = [&] {
    y = x;
    head_rmsnorm_forward(y.data(), saved.data(), rstd.data(), w.data(), M, W, first, heads, hs, eps,
                         f32);
    return dot(y.data(), r);
  };
  loss();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t c = 0; c < W; ++c) {
      const int64_t h = c / hs - first;
      if (h < 0 || h >= heads || c >= (first + heads) * hs) {
        EXPECT_EQ(y[m * W + c], x[m * W + c]) << "untouched column " << c;
        continue;
      }
      double squares = 0;
      for (int64_t i = 0; i < hs; ++i) {
        const double v = x[m * W + (first + h) * hs + i];
        squares += v * v;
      }
      const double s = 1.0 / std::sqrt(squares / double(hs) + eps);
      EXPECT_NEAR(y[m * W + c], x[m * W + c] * s * w[size_t(c % hs)], 1e-5) << m << "," << c;
    }
  std::vector<float> d = r, dw(w.size(), 0.f);
  head_rmsnorm_backward(d.data(), dw.data(), saved.data(), w.data(), rstd.data(), M, W, first,
                        heads, hs, f32);
  expect_gradient("head rmsnorm d_x", x, d, loss, 1e-2f, 3e-3, 3e-2);
  expect_gradient("head rmsnorm d_weight", w, dw, loss);
}

// Causal attention in double with kv head h / group for query head h, on the packed layout.
std::vector<double> naive_gqa(const std::vector<float>& qkv, const AttentionShape& s) {
  const int64_t W = s.qkv_width(), hs = s.head_size, C = s.C();
  std::vector<double> out(size_t(s.B * s.T * C));
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h) {
      const int64_t g = h / s.group();
      auto at = [&](int64_t t, int64_t column) {
        return double(qkv[size_t((b * s.T + t) * W + column)]);
      };
      for (int64_t t = 0; t < s.T; ++t) {
        std::vector<double> p(size_t(t + 1));
        double mx = -1e300, sum = 0;
        for (int64_t u = 0; u <= t; ++u) {
          double d = 0;
          for (int64_t i = 0; i < hs; ++i) d += at(t, h * hs + i) * at(u, C + g * hs + i);
          p[size_t(u)] = d / std::sqrt(double(hs));
          mx = std::max(mx, p[size_t(u)]);
        }
        for (double& v : p) sum += v = std::exp(v - mx);
        for (int64_t i = 0; i < hs; ++i) {
          double y = 0;
          for (int64_t u = 0; u <= t; ++u)
            y += p[size_t(u)] / sum * at(u, C + s.KV() * hs + g * hs + i);
          out[size_t((b * s.T + t) * C + h * hs + i)] = y;
        }
      }
    }
  return out;
}

// Grouped-query attention (4 query heads over 2 kv heads, and over 1) at several query-block
// sizes, against the naive reference and finite differences; the backward sums each shared kv
// head's gradient over its query heads.
TEST(LlamaOps, GroupedQueryAttention) {
  for (const int64_t kv : {int64_t(2), int64_t(1)})
    for (const int64_t block : {int64_t(6), int64_t(4), int64_t(1)}) {
      SCOPED_TRACE(fmt::format("kv heads {}, block {}", kv, block));
      const AttentionShape s{2, 6, 4, 3, block, kv};
      const int64_t C = s.C(), n_qkv = s.B * s.T * s.qkv_width(), n_tt = s.B * s.H * s.T * s.T;
      auto qkv = randn(size_t(n_qkv), 1), r = randn(size_t(s.B * s.T * C), 2);
      std::vector<float> probs(n_tt, NAN), scores(n_tt, NAN), dy(size_t(s.B * s.T * C)),
          ds(n_tt, NAN), out(size_t(s.B * s.T * C));
      AttentionSaved saved{probs.data()};
      AttentionScratch scratch{scores.data(), dy.data(), ds.data()};
      auto loss = [&] {
        attention_forward(out.data(), qkv.data(), saved, scratch, s, f32);
        return dot(out.data(), r);
      };
      loss();
      const std::vector<double> want = naive_gqa(qkv, s);
      for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], want[i], 1e-5) << i;
      std::vector<float> dqkv(n_qkv, NAN);
      attention_backward(dqkv.data(), r.data(), qkv.data(), saved, scratch, s, f32);
      expect_gradient("gqa d_qkv", qkv, dqkv, loss);
    }
}

}  // namespace
}  // namespace st
