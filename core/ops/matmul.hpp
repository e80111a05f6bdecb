#pragma once
// Matrix multiplication through oneDNN. Primitives are created once per distinct problem
// (shapes, strides, dtypes, bias, accumulate) and cached for the life of the process.
#include <cstdint>
#include <string>

#include "core/dtype.hpp"

namespace st {

// A (batch of) row-major-or-strided matrices: element (o, b, i, j) of a two-level batch is at
// data + o * outer_stride + b * batch_stride + i * row_stride + j * col_stride (in elements).
// Strided views let attention read each head of a packed [B, T, 3C] activation in place.
struct MatView {
  const void* data = nullptr;
  DType dtype = DType::f32;
  int64_t rows = 0, cols = 0;
  int64_t row_stride = 0, col_stride = 1, batch_stride = 0, outer_stride = 0;

  static MatView row_major(const void* data, DType dtype, int64_t rows, int64_t cols) {
    return {data, dtype, rows, cols, cols, 1, rows * cols, 0};
  }
  // The same memory read as its transpose.
  MatView t() const {
    return {data, dtype, cols, rows, col_stride, row_stride, batch_stride, outer_stride};
  }
};

// How many matrices a gemm multiplies: outer x inner (e.g. batch x heads).
struct GemmBatch {
  int64_t outer = 1, inner = 1;
};

struct GemmOptions {
  const void* bias = nullptr;  // [N], broadcast over rows
  DType bias_dtype = DType::f32;
  float alpha = 1.0f;       // scales the product; never given with a bias (oneDNN scales both)
  bool accumulate = false;  // C += alpha * A·B instead of C = ...
};

// C[b] = alpha * A[b] · B[b] (+ bias) (+ C[b] when accumulating), for b < batch.
// A is [M, K], B is [K, N], C is [M, N]; inputs of any float dtype, accumulation in FP32.
void gemm(GemmBatch batch, const MatView& a, const MatView& b, const MatView& c,
          const GemmOptions& options = {});
inline void gemm(int64_t batch, const MatView& a, const MatView& b, const MatView& c,
                 const GemmOptions& options = {}) {
  gemm(GemmBatch{1, batch}, a, b, c, options);
}

// The oneDNN implementation chosen for a BF16 2048x2048x2048 matmul (e.g. "brg:avx512_core_bf16").
std::string onednn_bf16_matmul_impl();
// The same for FP32 (e.g. "gemm:jit").
std::string onednn_fp32_matmul_impl();
std::string onednn_version();

}  // namespace st
