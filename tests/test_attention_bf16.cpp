// The AVX512-BF16 attention kernels against the general path (oneDNN's BF16 matmuls per block
// and separate softmax passes) and against FP32 attention on the same BF16-rounded inputs:
// probabilities, outputs and every part of d_qkv, for multi-head and grouped-query attention,
// head sizes 32, 64 and 128, blocks that do and do not divide T, and one block over all of T.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <type_traits>
#include <vector>

#include "core/bf16.hpp"
#include "core/cpu_features.hpp"
#include "core/ops/attention.hpp"
#include "core/ops/attention_bf16.hpp"
#include "core/ops/elementwise.hpp"

namespace st {
namespace {

struct Result {
  std::vector<float> probs, out, d_qkv;  // widened to FP32
};

template <class T>
std::vector<float> widen(const std::vector<T>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if constexpr (std::is_same_v<T, bf16>)
      out[i] = bf16_to_f32(v[i]);
    else
      out[i] = v[i];
  }
  return out;
}

// Attention forward and backward in `dtype` on the given (already BF16-exact) inputs.
template <class T>
Result attend(const AttentionShape& s, const std::vector<float>& qkv32,
              const std::vector<float>& d_out, DType dtype) {
  const size_t tt = size_t(s.B * s.H * s.T * s.T), y = size_t(s.B * s.T * s.C());
  std::vector<T> qkv(qkv32.size()), probs(tt), out(y), dy(y), ds(tt);
  for (size_t i = 0; i < qkv.size(); ++i) {
    if constexpr (std::is_same_v<T, bf16>)
      qkv[i] = f32_to_bf16(qkv32[i]);
    else
      qkv[i] = qkv32[i];
  }
  std::vector<float> scores(tt), d_qkv(qkv.size(), NAN);
  const AttentionSaved saved{probs.data()};
  const AttentionScratch scratch{scores.data(), dy.data(), ds.data()};
  attention_forward(out.data(), qkv.data(), saved, scratch, s, dtype);
  attention_backward(d_qkv.data(), d_out.data(), qkv.data(), saved, scratch, s, dtype);
  // Only each block's keys are part of the result.
  Result r{widen(probs), widen(out), d_qkv};
  for (int64_t row = 0; row < s.B * s.H * s.T; ++row) {
    const int64_t t = row % s.T, end = std::min(s.T, (t / s.block + 1) * s.block);
    for (int64_t k = end; k < s.T; ++k) r.probs[size_t(row * s.T + k)] = 0;
  }
  return r;
}

void expect_close(const char* what, const std::vector<float>& got, const std::vector<float>& want,
                  double rel) {
  double scale = 0;
  for (float w : want) scale = std::max(scale, double(std::fabs(w)));
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(double(got[i]) - want[i]) <= rel * scale) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", want " << want[i]
                    << " (tolerance " << rel * scale << ")";
  EXPECT_EQ(bad, 0u) << what;
}

class AttentionBf16 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu_features().avx512_bf16 || !cpu_features().avx512bw || !cpu_features().avx512vl)
      GTEST_SKIP() << "needs AVX512-BF16 (with AVX512BW and VL; this CPU lacks them)";
    set_elementwise_cap(VectorTier::avx512);  // whatever SHARDTRAIN_KERNELS said
  }
  // Back to what the run started with (SHARDTRAIN_KERNELS=avx2 runs every other test at avx2).
  void TearDown() override { set_elementwise_cap(before_); }
  const VectorTier before_ = elementwise_tier();
};

TEST_F(AttentionBf16, MatchesTheGeneralPathAndFp32) {
  struct Case {
    int64_t B, T, H, hs, block, kv;
  };
  for (const Case c :
       {Case{2, 128, 2, 64, 64, 0}, Case{1, 96, 4, 64, 64, 2}, Case{2, 70, 2, 32, 16, 1},
        Case{1, 64, 2, 128, 64, 0}, Case{1, 50, 3, 64, 50, 0}, Case{1, 40, 2, 64, 2, 0}}) {
    const AttentionShape s{c.B, c.T, c.H, c.hs, c.block, c.kv};
    SCOPED_TRACE(
        fmt::format("B {} T {} H {} kv {} hs {} block {}", c.B, c.T, c.H, s.KV(), c.hs, c.block));
    set_elementwise_cap(VectorTier::avx512);
    ASSERT_TRUE(attention_bf16_kernels_run(s, DType::bf16));
    std::mt19937 gen(11);
    std::normal_distribution<float> normal(0.f, 1.f);
    std::vector<float> qkv(size_t(s.B * s.T * s.qkv_width())), d_out(size_t(s.B * s.T * s.C()));
    // Scores of a few units, as in training; the inputs exact in BF16 so that all runs see them.
    for (float& x : qkv) x = round_to_bf16(normal(gen) * 1.5f);
    for (float& x : d_out) x = normal(gen);
    const Result fused = attend<bf16>(s, qkv, d_out, DType::bf16);
    set_elementwise_cap(VectorTier::avx2);
    ASSERT_FALSE(attention_bf16_kernels_run(s, DType::bf16));
    const Result general = attend<bf16>(s, qkv, d_out, DType::bf16);
    const Result exact = attend<float>(s, qkv, d_out, DType::f32);
    // Against the general BF16 path: the same roundings of FP32 sums taken in another order, so
    // at most a BF16 step apart where a rounding flips (seen: equal, d_qkv within 5e-6).
    expect_close("probs vs general", fused.probs, general.probs, 4e-3);
    expect_close("out vs general", fused.out, general.out, 4e-3);
    expect_close("d_qkv vs general", fused.d_qkv, general.d_qkv, 5e-4);
    // Against FP32: BF16's rounding of the probabilities, outputs, dY and dS (seen: 2e-3 to
    // 4.5e-3 of the largest value).
    expect_close("probs vs fp32", fused.probs, exact.probs, 4e-3);
    expect_close("out vs fp32", fused.out, exact.out, 8e-3);
    expect_close("d_qkv vs fp32", fused.d_qkv, exact.d_qkv, 1e-2);
  }
}

TEST_F(AttentionBf16, OnlyWhereItsShapesAndSettingsAllowIt) {
  const AttentionShape ok{1, 64, 2, 64, 64, 0};
  EXPECT_TRUE(attention_bf16_kernels_run(ok, DType::bf16));
  EXPECT_FALSE(attention_bf16_kernels_run(ok, DType::f32));
  EXPECT_FALSE(attention_bf16_kernels_run({1, 64, 2, 48, 64, 0}, DType::bf16));  // head size
  EXPECT_FALSE(attention_bf16_kernels_run({1, 63, 2, 64, 64, 0}, DType::bf16));  // odd T
  EXPECT_FALSE(attention_bf16_kernels_run({1, 64, 2, 64, 7, 0}, DType::bf16));   // odd block
  set_elementwise_cap(VectorTier::avx2);  // SHARDTRAIN_KERNELS=avx2
  EXPECT_FALSE(attention_bf16_kernels_run(ok, DType::bf16));
}

}  // namespace
}  // namespace st
