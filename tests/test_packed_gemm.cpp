// shardtrain's own GEMM (the widened BF16 path) against an FP64 reference over the same widened
// inputs: every dtype mix, transposed and batched strided views, bias, alpha, accumulation,
// edges of the register and cache blocks, long K into a BF16 output; both micro-kernels. Then
// gemm() on the widened path against oneDNN's native BF16 matmul where the CPU has it.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/bf16.hpp"
#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "core/ops/matmul.hpp"
#include "core/ops/matmul_path.hpp"
#include "core/ops/packed_gemm.hpp"

namespace st {
namespace {

// Storage of one operand in either dtype, filled with values exactly representable in BF16
// (so the FP64 reference sees exactly what the GEMM sees).
struct Buffer {
  DType dtype;
  std::vector<float> f32;
  std::vector<bf16> h;
  Buffer(DType d, size_t n, uint32_t seed) : dtype(d) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> dist(0.f, 1.f);
    f32.resize(n);
    for (float& x : f32) x = round_to_bf16(dist(gen));
    if (d == DType::bf16) {
      h.resize(n);
      for (size_t i = 0; i < n; ++i) h[i] = f32_to_bf16(f32[i]);
    }
  }
  void* data() { return dtype == DType::f32 ? static_cast<void*>(f32.data()) : h.data(); }
  float at(int64_t i) const {
    return dtype == DType::f32 ? f32[size_t(i)] : bf16_to_f32(h[size_t(i)]);
  }
};

struct Case {
  int64_t outer, inner, M, K, N;
  DType da, db, dc;
  bool a_transposed, b_transposed, bias, accumulate;
  float alpha;
};

std::string describe(const Case& c) {
  return fmt::format("batch {}x{} M={} K={} N={} A {}{} B {}{} C {} bias {} acc {} alpha {}",
                     c.outer, c.inner, c.M, c.K, c.N, dtype_name(c.da), c.a_transposed ? "ᵀ" : "",
                     dtype_name(c.db), c.b_transposed ? "ᵀ" : "", dtype_name(c.dc), c.bias,
                     c.accumulate, c.alpha);
}

// Each matrix sits in a larger, padded allocation (strides above the dense ones), so views
// that read past their bounds or assume density are caught.
void check(const Case& t) {
  SCOPED_TRACE(describe(t));
  const int64_t pad = 3;
  // A: [M, K] read through strides; stored transposed ([K, M] row-major) when a_transposed.
  const int64_t a_ld = (t.a_transposed ? t.M : t.K) + pad;
  const int64_t a_mat = (t.a_transposed ? t.K : t.M) * a_ld + pad;
  const int64_t b_ld = (t.b_transposed ? t.K : t.N) + pad;
  const int64_t b_mat = (t.b_transposed ? t.N : t.K) * b_ld + pad;
  const int64_t c_ld = t.N + pad, c_mat = t.M * c_ld + pad;
  const int64_t batches = t.outer * t.inner;
  Buffer a(t.da, size_t(batches * a_mat), 1), b(t.db, size_t(batches * b_mat), 2);
  Buffer c(t.dc, size_t(batches * c_mat), 3), bias(t.da, size_t(t.N), 4);
  const Buffer c_before = c;
  MatView av = t.a_transposed
                   ? MatView{a.data(), t.da, t.K, t.M, a_ld, 1, a_mat, t.inner * a_mat}.t()
                   : MatView{a.data(), t.da, t.M, t.K, a_ld, 1, a_mat, t.inner * a_mat};
  MatView bv = t.b_transposed
                   ? MatView{b.data(), t.db, t.N, t.K, b_ld, 1, b_mat, t.inner * b_mat}.t()
                   : MatView{b.data(), t.db, t.K, t.N, b_ld, 1, b_mat, t.inner * b_mat};
  MatView cv{c.data(), t.dc, t.M, t.N, c_ld, 1, c_mat, t.inner * c_mat};
  GemmOptions options;
  options.alpha = t.alpha;
  options.accumulate = t.accumulate;
  if (t.bias) {
    options.bias = bias.data();
    options.bias_dtype = t.da;
  }
  packed_gemm({t.outer, t.inner}, av, bv, cv, options);
  int64_t bad = 0;
  for (int64_t p = 0; p < batches; ++p)
    for (int64_t i = 0; i < t.M; ++i)
      for (int64_t j = 0; j < t.N; ++j) {
        double sum = 0, magnitude = 0;
        for (int64_t k = 0; k < t.K; ++k) {
          const int64_t ai = p * a_mat + (t.a_transposed ? k * a_ld + i : i * a_ld + k);
          const int64_t bi = p * b_mat + (t.b_transposed ? j * b_ld + k : k * b_ld + j);
          sum += double(a.at(ai)) * b.at(bi);
          magnitude += std::abs(double(a.at(ai)) * b.at(bi));
        }
        const int64_t ci = p * c_mat + i * c_ld + j;
        double want =
            t.alpha * sum + (t.bias ? bias.at(j) : 0.0) + (t.accumulate ? c_before.at(ci) : 0.0);
        // FP32 accumulation error, plus one BF16 rounding of the output.
        double tol = 1e-6 * (std::abs(t.alpha) * magnitude + 4) * std::sqrt(double(t.K) + 1);
        if (t.dc == DType::bf16) tol += std::abs(want) / 256.0;
        if (std::abs(c.at(ci) - want) > tol && bad++ < 5)
          ADD_FAILURE() << "C[" << p << "][" << i << "][" << j << "] = " << c.at(ci) << ", want "
                        << want << " ± " << tol;
      }
  // The padding between rows and after each matrix is untouched.
  for (int64_t p = 0; p < batches; ++p)
    for (int64_t i = 0; i < t.M; ++i)
      for (int64_t j = t.N; j < c_ld; ++j) {
        const int64_t ci = p * c_mat + i * c_ld + j;
        ASSERT_EQ(c.at(ci), c_before.at(ci)) << "padding written at row " << i;
      }
}

class PackedGemm : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (!GetParam() && !(cpu_features().avx2 && cpu_features().fma))
      GTEST_SKIP() << "the avx2-fma micro-kernel needs AVX2 and FMA, which this CPU lacks";
    set_packed_gemm_portable(GetParam());
  }
  void TearDown() override { set_packed_gemm_portable(false); }
};

TEST_P(PackedGemm, EveryDtypeMixAndLayoutMatchesFp64Reference) {
  const DType f = DType::f32, h = DType::bf16;
  for (DType da : {f, h})
    for (DType db : {f, h})
      for (DType dc : {f, h})
        for (bool ta : {false, true})
          for (bool tb : {false, true})
            check({1, 1, 13, 21, 35, da, db, dc, ta, tb, true, false, 1.0f});
}

TEST_P(PackedGemm, BlockEdgesBatchesAlphaAndAccumulation) {
  const DType f = DType::f32, h = DType::bf16;
  // Exactly one register block; one row / column short and over; K across the KC blocks.
  check({1, 1, 6, 8, 16, h, h, f, false, false, false, false, 1.0f});
  check({1, 1, 5, 300, 15, h, h, f, false, true, false, true, 0.5f});
  check({1, 1, 7, 513, 17, h, h, f, true, false, true, true, 1.0f});
  check({1, 1, 175, 600, 4100, h, h, f, false, false, false, true, 1.0f});
  check({1, 1, 300, 257, 70, h, h, h, false, true, true, false, 1.0f});
  // Two-level batches (attention's batch x heads), few and many.
  check({2, 3, 9, 10, 11, h, h, f, false, true, false, false, 0.125f});
  check({1, 3, 40, 64, 33, h, h, h, false, false, false, false, 1.0f});
  check({3, 4, 8, 16, 8, h, f, f, true, false, false, true, 2.0f});
  // A long K into a BF16 output (through FP32 sums), and K = 0 (bias, or C kept).
  check({1, 2, 3, 4200, 5, h, h, h, false, true, false, true, 1.0f});
  check({1, 1, 4, 0, 5, h, h, h, false, false, true, false, 1.0f});
  check({1, 1, 4, 0, 5, h, h, f, false, false, false, true, 1.0f});
}

INSTANTIATE_TEST_SUITE_P(Kernels, PackedGemm, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "portable" : "avx2_fma"; });

TEST(Bf16MatmulPath, WidenedMatchesNativeWhereTheCpuHasIt) {
  if (!native_bf16_matmul_available())
    GTEST_SKIP() << "native BF16 matmul needs AVX512-core (oneDNN " << onednn_version()
                 << "); this CPU: " << cpu_features().summary();
  const int64_t M = 37, K = 300, N = 50;
  Buffer a(DType::bf16, size_t(M * K), 5), b(DType::bf16, size_t(K * N), 6);
  Buffer native(DType::bf16, size_t(M * N), 7), widened = native;
  for (Bf16MatmulPath path : {Bf16MatmulPath::native, Bf16MatmulPath::widened}) {
    set_bf16_matmul_path(path);
    Buffer& out = path == Bf16MatmulPath::native ? native : widened;
    gemm(1, MatView::row_major(a.data(), DType::bf16, M, K),
         MatView::row_major(b.data(), DType::bf16, K, N),
         MatView::row_major(out.data(), DType::bf16, M, N));
  }
  set_bf16_matmul_path(Bf16MatmulPath::automatic);
  int64_t differ = 0;
  for (int64_t i = 0; i < M * N; ++i) {
    EXPECT_NEAR(native.at(i), widened.at(i), std::abs(native.at(i)) / 128.0 + 1e-5) << i;
    differ += native.at(i) != widened.at(i);
  }
  // Both round the same FP32 sums up to order: nearly all outputs agree bit for bit.
  EXPECT_LT(differ, M * N / 20);
}

TEST(Bf16MatmulPath, NativeIsRefusedWhereOneDnnHasNone) {
  if (native_bf16_matmul_available())
    GTEST_SKIP() << "this CPU has AVX512-core, so oneDNN has a native BF16 matmul to refuse";
  try {
    set_bf16_matmul_path(Bf16MatmulPath::native);
    FAIL() << "native accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("precision.bf16_matmul = native"), std::string::npos);
  }
  EXPECT_EQ(active_bf16_matmul_path(), Bf16MatmulPath::widened);
}

}  // namespace
}  // namespace st
