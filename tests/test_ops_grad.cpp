// Every op's backward against central finite differences of its forward (FP32 path), and the
// matmul against a naive loop.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/bf16.hpp"
#include "core/error.hpp"
#include "core/ops/attention.hpp"
#include "core/ops/cross_entropy.hpp"
#include "core/ops/embedding.hpp"
#include "core/ops/fastmath.hpp"
#include "core/ops/gelu.hpp"
#include "core/ops/layernorm.hpp"
#include "core/ops/linear.hpp"
#include "core/ops/matmul.hpp"
#include "core/ops/matmul_path.hpp"
#include "core/ops/weight_grad.hpp"
#include "tests/grad_check.hpp"

namespace st {
namespace {

using testing::dot;
using testing::expect_gradient;
using testing::f32;
using testing::randn;

TEST(Matmul, TransposedAndBatchedViewsMatchNaiveLoop) {
  const int64_t batch = 3, M = 5, K = 7, N = 4;
  auto a = randn(size_t(batch * K * M), 1);  // stored transposed: [batch, K, M]
  auto b = randn(size_t(batch * K * N), 2);
  std::vector<float> c(size_t(batch * M * N), 1.0f);
  MatView av{a.data(), f32, K, M, M, 1, K * M};
  GemmOptions opt;
  opt.alpha = 0.5f;
  opt.accumulate = true;
  gemm(batch, av.t(), MatView{b.data(), f32, K, N, N, 1, K * N},
       MatView{c.data(), f32, M, N, N, 1, M * N}, opt);
  for (int64_t p = 0; p < batch; ++p)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += a[p * K * M + k * M + i] * b[p * K * N + k * N + j];
        EXPECT_NEAR(c[p * M * N + i * N + j], 1.0 + 0.5 * s, 1e-4);
      }
}

// oneDNN would scale a bias with alpha and the packed GEMM would not: gemm refuses the pair.
TEST(Matmul, AlphaWithABiasIsRefused) {
  std::vector<float> a(6, 1.f), b(6, 1.f), bias(3, 1.f), c(6);
  GemmOptions opt;
  opt.bias = bias.data();
  opt.alpha = 0.5f;
  try {
    gemm(1, MatView::row_major(a.data(), f32, 2, 3), MatView::row_major(b.data(), f32, 3, 2),
         MatView::row_major(c.data(), f32, 2, 2), opt);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("alpha"), std::string::npos) << e.what();
  }
}

TEST(Grad, Linear) {
  const int64_t M = 6, K = 5, N = 7;
  auto x = randn(size_t(M * K), 1), w = randn(size_t(K * N), 2), b = randn(size_t(N), 3);
  auto r = randn(size_t(M * N), 4);
  std::vector<float> out(size_t(M * N));
  auto loss = [&] {
    linear_forward(out.data(), x.data(), w.data(), b.data(), M, K, N, f32);
    return dot(out.data(), r);
  };
  std::vector<float> dx(x.size()), dw(w.size(), 0.f), db(b.size(), 0.f);
  linear_backward(dx.data(), dw.data(), db.data(), r.data(), nullptr, x.data(), w.data(), M, K, N,
                  f32);
  expect_gradient("linear d_in", x, dx, loss);
  expect_gradient("linear d_weight", w, dw, loss);
  expect_gradient("linear d_bias", b, db, loss);
  // Weight and bias gradients accumulate.
  linear_backward(dx.data(), dw.data(), db.data(), r.data(), nullptr, x.data(), w.data(), M, K, N,
                  f32);
  std::vector<float> dw1(w.size(), 0.f), db1(b.size(), 0.f);
  linear_backward(dx.data(), dw1.data(), db1.data(), r.data(), nullptr, x.data(), w.data(), M, K, N,
                  f32);
  for (size_t i = 0; i < dw.size(); ++i) EXPECT_FLOAT_EQ(dw[i], 2 * dw1[i]);
}

// A linear whose output goes through GELU: the backward takes the gradient after GELU and the
// output before it, and makes every gradient in one pass over them.
TEST(Grad, LinearThroughGelu) {
  const int64_t M = 5, K = 4, N = 9;
  auto x = randn(size_t(M * K), 1), w = randn(size_t(K * N), 2), b = randn(size_t(N), 3);
  auto r = randn(size_t(M * N), 4);
  std::vector<float> pre(size_t(M * N)), out(size_t(M * N));
  auto loss = [&] {
    linear_forward(pre.data(), x.data(), w.data(), b.data(), M, K, N, f32);
    gelu_forward(out.data(), pre.data(), out.size(), f32);
    return dot(out.data(), r);
  };
  loss();
  std::vector<float> dx(x.size()), dw(w.size(), 0.f), db(b.size(), 0.f), scratch(size_t(M * N));
  linear_backward(dx.data(), dw.data(), db.data(), r.data(), scratch.data(), x.data(), w.data(), M,
                  K, N, f32, pre.data());
  expect_gradient("linear+gelu d_in", x, dx, loss, 1e-3f, 1e-3, 1e-2);
  expect_gradient("linear+gelu d_weight", w, dw, loss, 1e-3f, 1e-3, 1e-2);
  expect_gradient("linear+gelu d_bias", b, db, loss, 1e-3f, 1e-3, 1e-2);
}

// BF16 activation gradients (GradDtypes): an output gradient given in BF16 gives bit for bit
// what the FP32 path gives for the same (rounded) values, with and without GELU and bias; a
// d_in asked for in BF16 is the FP32 d_in rounded (oneDNN or the packed GEMM rounds its sums
// once, to nearest even). Both BF16 matmul paths where the CPU has them.
void check_bf16_activation_gradients();

TEST(Linear, Bf16ActivationGradientsAreTheFp32PathsValuesRounded) {
  std::vector<Bf16MatmulPath> paths{Bf16MatmulPath::widened};
  if (native_bf16_matmul_available()) paths.push_back(Bf16MatmulPath::native);
  for (const Bf16MatmulPath path : paths) {
    SCOPED_TRACE(bf16_matmul_path_name(path));
    set_bf16_matmul_path(path);
    check_bf16_activation_gradients();
  }
  set_bf16_matmul_path(Bf16MatmulPath::automatic);
}

void check_bf16_activation_gradients() {
  const int64_t M = 37, K = 24, N = 40;
  const DType bf = DType::bf16;
  auto rounded = [](std::vector<float> v) {
    for (float& x : v) x = round_to_bf16(x);
    return v;
  };
  auto to_bf16 = [](const std::vector<float>& v) {
    std::vector<bf16> out(v.size());
    convert_f32_to_bf16(v.data(), out.data(), v.size());
    return out;
  };
  const auto x = to_bf16(randn(size_t(M * K), 1)), w = to_bf16(randn(size_t(K * N), 2));
  const auto pre = to_bf16(randn(size_t(M * N), 3));
  const std::vector<float> d = rounded(randn(size_t(M * N), 4));
  const std::vector<bf16> d_b = to_bf16(d);
  for (const bool gelu : {false, true}) {
    SCOPED_TRACE(gelu ? "through GELU" : "plain");
    const void* gelu_input = gelu ? pre.data() : nullptr;
    std::vector<float> dx(size_t(M * K)), dw(size_t(K * N), 0.f), db(size_t(N), 0.f);
    std::vector<float> dx_b(dx.size()), dw_b(dw.size(), 0.f), db_b(db.size(), 0.f);
    std::vector<bf16> scratch(size_t(M * N));
    linear_backward(dx.data(), dw.data(), db.data(), d.data(), scratch.data(), x.data(), w.data(),
                    M, K, N, bf, gelu_input);
    linear_backward(dx_b.data(), dw_b.data(), db_b.data(), d_b.data(), scratch.data(), x.data(),
                    w.data(), M, K, N, bf, gelu_input, {.d_out = bf});
    EXPECT_EQ(dx_b, dx);
    EXPECT_EQ(dw_b, dw);
    EXPECT_EQ(db_b, db);
    std::vector<bf16> dx_rounded(dx.size());
    std::vector<float> dw_again(dw.size(), 0.f), db_again(db.size(), 0.f);
    linear_backward(dx_rounded.data(), dw_again.data(), db_again.data(), d.data(), scratch.data(),
                    x.data(), w.data(), M, K, N, bf, gelu_input, {.d_in = bf});
    for (size_t i = 0; i < dx.size(); ++i)
      ASSERT_EQ(dx_rounded[i], f32_to_bf16(dx[i])) << "d_in element " << i;
  }
  EXPECT_THROW(linear_backward(nullptr, nullptr, nullptr, d.data(), nullptr, x.data(), w.data(), M,
                               K, N, DType::f32, nullptr, {.d_out = bf}),
               Error);
}

// Zero bubble's split: inside a DeferWeightGrads scope the input and bias gradients come at
// once and the weight gradients not at all, even when the activations and the output gradient
// they read are overwritten before the deferred half runs; then run() adds exactly the weight
// gradients of the undeferred backward, for a two-part fused projection and a plain one.
TEST(Linear, DeferredWeightGradientsAreTheImmediateOnes) {
  const int64_t M = 19, K = 12, N1 = 8, N2 = 6, N = N1 + N2;
  const std::vector<float> x = randn(size_t(M * K), 5), w = randn(size_t(N * K), 6),
                           d = randn(size_t(M * N), 7);
  // Weight gradients: [N, K] for linear_backward's one matmul ([K, N] there); for the fused
  // projection each part's apart (its own buffer), so each is a matmul of its own reading its
  // columns of the output gradient (a strided view) rather than one merged matmul.
  struct Grads {
    std::vector<float> dx, dw_first, dw_second, db;
  };
  const auto fresh = [&] {
    return Grads{std::vector<float>(size_t(M * K)), std::vector<float>(size_t(N * K), 0.5f),
                 std::vector<float>(size_t(N2 * K), 0.25f), std::vector<float>(size_t(N), 0.f)};
  };
  for (const bool fused : {true, false}) {
    SCOPED_TRACE(fused ? "fused" : "linear_backward");
    auto backward = [&](Grads& g, const std::vector<float>& in, const std::vector<float>& grad) {
      if (!fused)
        return linear_backward(g.dx.data(), g.dw_first.data(), g.db.data(), grad.data(), nullptr,
                               in.data(), w.data(), M, K, N, DType::f32, nullptr);
      const LinearPart parts[] = {
          {w.data(), g.dw_first.data(), N1, nullptr, g.db.data()},
          {w.data() + N1 * K, g.dw_second.data(), N2, nullptr, g.db.data() + N1}};
      fused_linear_backward_from(g.dx.data(), grad.data(), in.data(), parts, M, K, DType::f32);
    };
    Grads now = fresh();
    backward(now, x, d);
    Grads later = fresh();
    std::vector<float> x2 = x, d2 = d;
    DeferredWeightGrads deferred;
    {
      DeferWeightGrads defer(deferred);
      backward(later, x2, d2);
    }
    EXPECT_EQ(later.dx, now.dx);
    EXPECT_EQ(later.db, now.db);
    EXPECT_EQ(later.dw_first, fresh().dw_first) << "a weight gradient ran at once";
    EXPECT_EQ(later.dw_second, fresh().dw_second) << "a weight gradient ran at once";
    EXPECT_GT(deferred.bytes(), 0);
    std::fill(x2.begin(), x2.end(), 9.f);  // the scratch the backward read, reused
    std::fill(d2.begin(), d2.end(), 9.f);
    deferred.run();
    EXPECT_TRUE(deferred.empty());
    for (size_t i = 0; i < now.dw_first.size(); ++i)
      ASSERT_NEAR(later.dw_first[i], now.dw_first[i], 1e-6f) << "element " << i;
    for (size_t i = 0; i < now.dw_second.size(); ++i)
      ASSERT_NEAR(later.dw_second[i], now.dw_second[i], 1e-6f) << "element " << i;
    if (fused) {
      EXPECT_NE(now.dw_second, fresh().dw_second);  // the second part's matmul ran
    }
  }
}

TEST(Grad, LayerNorm) {
  const int64_t M = 4, C = 9;
  auto x = randn(size_t(M * C), 1), w = randn(size_t(C), 2), b = randn(size_t(C), 3);
  auto r = randn(size_t(M * C), 4);
  std::vector<float> out(x.size()), mean(static_cast<size_t>(M)), rstd(static_cast<size_t>(M));
  auto loss = [&] {
    layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), M, C,
                      f32);
    return dot(out.data(), r);
  };
  loss();
  std::vector<float> dx(x.size(), 0.f), dw(w.size(), 0.f), db(b.size(), 0.f);
  layernorm_backward(dx.data(), dw.data(), db.data(), r.data(), x.data(), w.data(), mean.data(),
                     rstd.data(), M, C, f32);
  expect_gradient("layernorm d_x", x, dx, loss, 1e-2f, 3e-3, 3e-2);
  expect_gradient("layernorm d_weight", w, dw, loss);
  expect_gradient("layernorm d_bias", b, db, loss);
}

TEST(Grad, Gelu) {
  auto x = randn(64, 1, 2.0f), r = randn(64, 2);
  std::vector<float> out(64);
  auto loss = [&] {
    gelu_forward(out.data(), x.data(), x.size(), f32);
    return dot(out.data(), r);
  };
  std::vector<float> dx(64);
  gelu_backward(dx.data(), r.data(), x.data(), 64, f32);
  expect_gradient("gelu", x, dx, loss, 1e-3f, 1e-3, 1e-2);
  // The tanh form at known points.
  std::vector<float> pts = {0.f, 1.f, -1.f, 3.f}, y(4);
  gelu_forward(y.data(), pts.data(), 4, f32);
  EXPECT_NEAR(y[0], 0.0, 1e-7);
  EXPECT_NEAR(y[1], 0.8411920, 1e-6);
  EXPECT_NEAR(y[2], -0.1588080, 1e-6);
  EXPECT_NEAR(y[3], 2.9963627, 1e-6);
}

// Causal attention at several query-block sizes: one block (the whole T), blocks that do not
// divide T, and one row per block. The outputs must not depend on the blocking.
TEST(Grad, CausalAttention) {
  std::vector<float> first_out;
  for (const int64_t block : {int64_t(7), int64_t(3), int64_t(2), int64_t(1)}) {
    SCOPED_TRACE(fmt::format("block {}", block));
    const AttentionShape s{2, 7, 2, 3, block};
    const int64_t C = s.C(), n_qkv = s.B * s.T * 3 * C, n_tt = s.B * s.H * s.T * s.T;
    auto qkv = randn(size_t(n_qkv), 1), r = randn(size_t(s.B * s.T * C), 2);
    // Probabilities and scores start as NaN: blocks above the diagonal must never be read.
    std::vector<float> probs(n_tt, NAN), scores(n_tt, NAN), dy(size_t(s.B * s.T * C)),
        ds(n_tt, NAN), out(size_t(s.B * s.T * C));
    AttentionSaved saved{probs.data()};
    AttentionScratch scratch{scores.data(), dy.data(), ds.data()};
    auto loss = [&] {
      attention_forward(out.data(), qkv.data(), saved, scratch, s, f32);
      return dot(out.data(), r);
    };
    loss();
    // Causality: the first token's output is its own value vector.
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t d = 0; d < s.head_size; ++d)
        EXPECT_NEAR(out[h * s.head_size + d], qkv[2 * C + h * s.head_size + d], 1e-6);
    if (first_out.empty()) first_out = out;
    for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], first_out[i], 1e-5) << i;
    std::vector<float> dqkv(n_qkv, NAN);
    attention_backward(dqkv.data(), r.data(), qkv.data(), saved, scratch, s, f32);
    expect_gradient("attention d_qkv", qkv, dqkv, loss);
  }
}

TEST(Grad, CrossEntropy) {
  const int64_t M = 3, V = 11;
  auto logits = randn(size_t(M * V), 1, 2.0f);
  std::vector<int32_t> targets = {0, 7, 10};
  std::vector<float> losses(static_cast<size_t>(M));
  const float scale = 0.25f;
  auto loss = [&] {
    cross_entropy_forward(losses.data(), logits.data(), targets.data(), M, V, V);
    double s = 0;
    for (float l : losses) s += l;
    return s * scale;
  };
  loss();
  // Against log-softmax computed directly in double.
  for (int64_t i = 0; i < M; ++i) {
    double mx = -1e30, sum = 0;
    for (int64_t j = 0; j < V; ++j) mx = std::max(mx, double(logits[i * V + j]));
    for (int64_t j = 0; j < V; ++j) sum += std::exp(double(logits[i * V + j]) - mx);
    EXPECT_NEAR(losses[i], std::log(sum) + mx - logits[i * V + targets[i]], 1e-5);
  }
  std::vector<float> d(logits.size());
  cross_entropy_backward(d.data(), logits.data(), targets.data(), scale, M, V, V);
  expect_gradient("cross-entropy d_logits", logits, d, loss, 1e-2f, 1e-3, 1e-2);
  std::vector<int32_t> bad = {0, 11, 1};
  EXPECT_THROW(cross_entropy_forward(losses.data(), logits.data(), bad.data(), M, V, V), Error);
}

// A padded vocabulary: rows ld = V + 5 apart, the padding filled with huge values. Losses and
// real gradients equal the unpadded ones bitwise; the padding's gradient is zero.
TEST(Grad, CrossEntropyIgnoresPaddedColumns) {
  const int64_t M = 3, V = 11, ld = 16;
  const auto logits = randn(size_t(M * V), 1, 2.0f);
  std::vector<float> padded(size_t(M * ld), 1e4f);
  for (int64_t i = 0; i < M; ++i) std::copy_n(logits.begin() + i * V, V, padded.begin() + i * ld);
  const std::vector<int32_t> targets = {0, 7, 10};
  std::vector<float> want(static_cast<size_t>(M)), got(static_cast<size_t>(M));
  cross_entropy_forward(want.data(), logits.data(), targets.data(), M, V, V);
  cross_entropy_forward(got.data(), padded.data(), targets.data(), M, V, ld);
  EXPECT_EQ(got, want);
  std::vector<float> d_want(size_t(M * V)), d_got(size_t(M * ld), NAN);
  cross_entropy_backward(d_want.data(), logits.data(), targets.data(), 0.5f, M, V, V);
  cross_entropy_backward(d_got.data(), padded.data(), targets.data(), 0.5f, M, V, ld);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < ld; ++j)
      EXPECT_EQ(d_got[size_t(i * ld + j)], j < V ? d_want[size_t(i * V + j)] : 0.f)
          << i << "," << j;
}

// The BF16 gradient is the FP32 one rounded once, bit for bit, whichever chunk of the row the
// target falls in (V spans several 512-column chunks and ends inside one); padding is zero; and
// the forward's kept row normalizers give the backward the same bits as recomputing them.
TEST(Grad, CrossEntropyBf16GradientIsTheFp32OneRoundedAndKeptShiftsChangeNothing) {
  const int64_t M = 4, V = 1300, ld = 1304;
  const auto logits = randn(size_t(M * ld), 9, 3.0f);
  const std::vector<int32_t> targets = {0, 511, 512, 1299};
  std::vector<float> d32(size_t(M * ld));
  std::vector<bf16> d16(size_t(M * ld), bf16(0x7fc0));
  cross_entropy_backward(d32.data(), logits.data(), targets.data(), 0.25f, M, V, ld);
  cross_entropy_backward(d16.data(), DType::bf16, logits.data(), targets.data(), 0.25f, M, V, ld);
  for (size_t k = 0; k < d32.size(); ++k) ASSERT_EQ(d16[k], f32_to_bf16(d32[k])) << "element " << k;
  EXPECT_LT(d32[size_t(1 * ld + 511)], 0.f);  // the target's entry: softmax - 1, scaled
  // The forward's row normalizers, handed to the backward, give the same bits as recomputing.
  std::vector<float> losses(static_cast<size_t>(M)), shifts(static_cast<size_t>(M)),
      d_kept(static_cast<size_t>(M * ld));
  std::vector<bf16> d16_kept(size_t(M * ld));
  cross_entropy_forward(losses.data(), logits.data(), targets.data(), M, V, ld, shifts.data());
  cross_entropy_backward(d_kept.data(), logits.data(), targets.data(), 0.25f, M, V, ld,
                         shifts.data());
  cross_entropy_backward(d16_kept.data(), DType::bf16, logits.data(), targets.data(), 0.25f, M, V,
                         ld, shifts.data());
  for (size_t k = 0; k < d32.size(); ++k) {
    ASSERT_EQ(f32_bits(d_kept[k]), f32_bits(d32[k])) << "element " << k;
    ASSERT_EQ(d16_kept[k], d16[k]) << "element " << k;
  }
}

TEST(Grad, Embedding) {
  const int64_t B = 2, T = 3, C = 4, V = 5;
  auto wte = randn(size_t(V * C), 1), wpe = randn(size_t(T * C), 2),
       r = randn(size_t(B * T * C), 3);
  std::vector<int32_t> tokens = {1, 4, 1, 0, 1, 3};  // repeated tokens accumulate
  std::vector<float> out(size_t(B * T * C));
  auto loss = [&] {
    embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C, V, f32);
    return dot(out.data(), r);
  };
  std::vector<float> dwte(wte.size(), 0.f), dwpe(wpe.size(), 0.f);
  embedding_backward(dwte.data(), dwpe.data(), r.data(), tokens.data(), B, T, C);
  expect_gradient("embedding d_wte", wte, dwte, loss);
  expect_gradient("embedding d_wpe", wpe, dwpe, loss);
}

// The vectorizable exp against libm's, and at the edges: a NaN stays NaN (a non-finite loss
// must be reported as such; its conversion to an exponent is never undefined), infinities clamp.
TEST(FastMath, ExpMatchesLibmAndKeepsNaN) {
  for (float x = -80.0f; x < 80.0f; x += 0.37f)
    EXPECT_NEAR(fast_exp(x) / std::exp(x), 1.0f, 3e-7f) << x;
  EXPECT_TRUE(std::isnan(fast_exp(std::nanf(""))));
  EXPECT_TRUE(std::isnan(fast_exp(-std::nanf(""))));
  EXPECT_GT(fast_exp(INFINITY), 1e38f);
  EXPECT_LT(fast_exp(-INFINITY), 1e-37f);
  EXPECT_TRUE(std::isnan(fast_tanh(std::nanf(""))));
}

}  // namespace
}  // namespace st
