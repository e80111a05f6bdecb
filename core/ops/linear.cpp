#include "core/ops/linear.hpp"

#include <omp.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "core/bf16.hpp"
#include "core/op_profile.hpp"
#include "core/ops/elementwise.hpp"
#include "core/ops/gelu.hpp"
#include "core/ops/matmul.hpp"
#include "core/ops/weight_grad.hpp"

namespace st {

void linear_forward(void* out, const void* in, const void* weight, const void* bias, int64_t M,
                    int64_t K, int64_t N, DType dtype) {
  GemmOptions options;
  options.bias = bias;
  options.bias_dtype = dtype;
  gemm(1, MatView::row_major(in, dtype, M, K), MatView::row_major(weight, dtype, K, N),
       MatView::row_major(out, dtype, M, N), options);
}

namespace {

// Rows per partial column sum: fixed, so the bias gradient is the same whatever the threads.
constexpr int64_t kRowsPerPartial = 64;

// One row of g = d_out (⊙ gelu'(pre)), d_out in D (FP32, or T as its matmul rounded it):
// written to `out` in T when kWrite, added into `sums` when kSum. `row` holds N floats of
// scratch for the GELU product. Flags as template parameters keep the loop branch-free, so it
// vectorizes.
template <class T, class D, bool kGelu, bool kWrite, bool kSum>
void output_grad_row(T* __restrict out, float* __restrict sums, const D* __restrict d_out,
                     const T* __restrict pre, int64_t N, float* __restrict row) {
  if constexpr (kGelu) {
    gelu_grad_row(row, d_out, pre, N);
    if constexpr (kWrite) store_row(out, row, size_t(N));
    if constexpr (kSum) {
#pragma omp simd
      for (int64_t c = 0; c < N; ++c) sums[c] += row[c];
    }
  } else if constexpr (std::is_same_v<D, float>) {
    if constexpr (kWrite) store_row(out, d_out, size_t(N));
    if constexpr (kSum) {
#pragma omp simd
      for (int64_t c = 0; c < N; ++c) sums[c] += d_out[c];
    }
  } else {
#pragma omp simd
    for (int64_t c = 0; c < N; ++c) {
      const float g = to_f32(d_out[c]);
      if constexpr (kWrite) out[c] = from_f32<T>(g);
      if constexpr (kSum) sums[c] += g;
    }
  }
}

// One pass over d_out [M,N]: g = d_out (⊙ gelu'(pre)), written to `out` (when not null) in T,
// and added by columns into d_bias (when not null).
template <class T, class D, bool kGelu, bool kWrite, bool kSum>
void prepare_output_grad(T* out, float* d_bias, const D* d_out, const T* pre, int64_t M,
                         int64_t N) {
  const int64_t parts = (M + kRowsPerPartial - 1) / kRowsPerPartial;
  std::vector<float> partial(kSum ? size_t(parts * N) : 0, 0.f);  // [parts, N]
#pragma omp parallel
  {
    std::vector<float> row(kGelu ? size_t(N) : 0);  // [N], this thread's
#pragma omp for schedule(static)
    for (int64_t part = 0; part < parts; ++part) {
      for (int64_t i = part * kRowsPerPartial, end = std::min(M, i + kRowsPerPartial); i < end; ++i)
        output_grad_row<T, D, kGelu, kWrite, kSum>(
            out + (kWrite ? i * N : 0), partial.data() + (kSum ? part * N : 0), d_out + i * N,
            pre + (kGelu ? i * N : 0), N, row.data());
    }
  }
  if constexpr (kSum) {
    OpScope scope(OpKind::bias_grad);
    for (int64_t part = 0; part < parts; ++part) {
      const float* sums = partial.data() + part * N;
#pragma omp simd
      for (int64_t c = 0; c < N; ++c) d_bias[c] += sums[c];
    }
  }
}

template <class T, bool kGelu, bool kWrite, class D>
void prepare_output_grad(T* out, float* d_bias, const D* d_out, const T* pre, int64_t M,
                         int64_t N) {
  if (d_bias)
    prepare_output_grad<T, D, kGelu, kWrite, true>(out, d_bias, d_out, pre, M, N);
  else
    prepare_output_grad<T, D, kGelu, kWrite, false>(out, d_bias, d_out, pre, M, N);
}

}  // namespace

void linear_backward(void* d_in, float* d_weight, float* d_bias, const void* d_out,
                     void* d_out_scratch, const void* in, const void* weight, int64_t M, int64_t K,
                     int64_t N, DType dtype, const void* gelu_input, GradDtypes grads) {
  ST_CHECK((grads.d_in == DType::f32 || grads.d_in == dtype) &&
               (grads.d_out == DType::f32 || grads.d_out == dtype),
           "linear_backward: activation gradients are FP32 or {}", dtype_name(dtype));
  // g in dtype: d_out itself where it is in dtype and needs no GELU, else the scratch copy.
  const void* g = d_out;
  const bool copy = grads.d_out != dtype || gelu_input;
  if (copy || d_bias) {
    OpScope scope(gelu_input ? OpKind::gelu : OpKind::cast_copy);
    ST_CHECK(!copy || d_out_scratch, "linear_backward: the output gradient needs a scratch buffer");
    dispatch_float(dtype, [&]<class T>(T) {
      T* out = static_cast<T*>(d_out_scratch);
      const T* pre = static_cast<const T*>(gelu_input);
      const auto run = [&]<class D>(const D* d) {
        if (pre)
          prepare_output_grad<T, true, true>(out, d_bias, d, pre, M, N);
        else if (copy)
          prepare_output_grad<T, false, true>(out, d_bias, d, pre, M, N);
        else
          prepare_output_grad<T, false, false>(out, d_bias, d, pre, M, N);
      };
      if (grads.d_out == DType::f32)
        run(static_cast<const float*>(d_out));
      else
        run(static_cast<const T*>(d_out));
    });
    if (copy) g = d_out_scratch;
  }
  const MatView grad = MatView::row_major(g, dtype, M, N);
  if (d_in)
    gemm(1, grad, MatView::row_major(weight, dtype, K, N).t(),
         MatView::row_major(d_in, grads.d_in, M, K));
  weight_grad_gemm(MatView::row_major(in, dtype, M, K).t(), grad,
                   MatView::row_major(d_weight, DType::f32, K, N));
}

namespace {

// out[m, column + n] += bias[n] for the part's columns of a [M, width] buffer (dtype; summed in
// FP32, so BF16 rounds the matmul's output and then the sum).
void add_bias_columns(void* out, const void* bias, int64_t M, int64_t width, int64_t column,
                      int64_t N, DType dtype) {
  OpScope scope(OpKind::cast_copy);
  dispatch_float(dtype, [&]<class T>(T) {
    T* o = static_cast<T*>(out);
    const T* b = static_cast<const T*>(bias);
#pragma omp parallel for schedule(static) if (M * N > 32768)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        T& v = o[m * width + column + n];
        v = from_f32<T>(to_f32(v) + to_f32(b[n]));
      }
  });
}

// d_bias[n] += Σ_m g[m, column + n], summed in a fixed order (the same whatever the threads).
void add_column_sums(float* d_bias, const void* g, int64_t M, int64_t width, int64_t column,
                     int64_t N, DType dtype) {
  OpScope scope(OpKind::bias_grad);
  dispatch_float(dtype, [&]<class T>(T) {
    const T* grad = static_cast<const T*>(g);
#pragma omp parallel for schedule(static) if (M * N > 32768)
    for (int64_t n = 0; n < N; ++n) {
      double sum = 0;
      for (int64_t m = 0; m < M; ++m) sum += double(to_f32(grad[m * width + column + n]));
      d_bias[n] += float(sum);
    }
  });
}

int64_t total_width(std::span<const LinearPart> parts) {
  int64_t n = 0;
  for (const LinearPart& p : parts) n += p.N;
  return n;
}

// Part p's columns [column, column + N) of a [M, width] buffer.
MatView columns(const void* data, DType dtype, int64_t M, int64_t width, int64_t column,
                int64_t N) {
  return {static_cast<const char*>(data) + column * int64_t(dtype_size(dtype)),
          dtype,
          M,
          N,
          width,
          1,
          M * width,
          0};
}

// A pointer `count` elements of `dtype` past p (null stays null).
const void* past(const void* p, int64_t count, DType dtype) {
  return p ? static_cast<const char*>(p) + count * int64_t(dtype_size(dtype)) : nullptr;
}

// The parts with neighbours merged where their weights, gradients and biases lie back to back
// (as a family declares q, k, v and gate, up): one wide matmul instead of several narrow ones,
// which oneDNN splits over the threads better (llama-tiny's gate and up: 330 -> 380 GFLOP/s).
// Only for products whose every output element is the same reduction either way: the forward
// (over K) and the weight gradient (over M); d_in sums over the parts and stays per part.
std::vector<LinearPart> coalesced(std::span<const LinearPart> parts, int64_t K, DType dtype) {
  std::vector<LinearPart> out;
  for (const LinearPart& p : parts) {
    if (!out.empty()) {
      LinearPart& last = out.back();
      const bool adjacent = past(last.weight, last.N * K, dtype) == p.weight &&
                            past(last.d_weight, last.N * K, DType::f32) == p.d_weight &&
                            past(last.bias, last.N, dtype) == p.bias &&
                            past(last.d_bias, last.N, DType::f32) == p.d_bias;
      if (adjacent) {
        last.N += p.N;
        continue;
      }
    }
    out.push_back(p);
  }
  return out;
}

}  // namespace

void fused_linear_forward(void* out, const void* in, std::span<const LinearPart> parts, int64_t M,
                          int64_t K, DType dtype) {
  const int64_t width = total_width(parts);
  const MatView input = MatView::row_major(in, dtype, M, K);
  int64_t column = 0;
  for (const LinearPart& p : coalesced(parts, K, dtype)) {
    gemm(1, input, MatView::row_major(p.weight, dtype, p.N, K).t(),
         columns(out, dtype, M, width, column, p.N));
    if (p.bias) add_bias_columns(out, p.bias, M, width, column, p.N, dtype);
    column += p.N;
  }
}

void fused_linear_backward(void* d_in, const float* d_out, void* d_out_scratch, const void* in,
                           std::span<const LinearPart> parts, int64_t M, int64_t K, DType dtype,
                           DType d_in_dtype) {
  const void* g = d_out;
  if (dtype != DType::f32) {
    ST_CHECK(d_out_scratch, "fused_linear_backward: BF16 needs a scratch buffer");
    OpScope scope(OpKind::cast_copy);
    cast(d_out, DType::f32, d_out_scratch, dtype, size_t(M * total_width(parts)));
    g = d_out_scratch;
  }
  fused_linear_backward_from(d_in, g, in, parts, M, K, dtype, d_in_dtype);
}

void fused_linear_backward_from(void* d_in, const void* g, const void* in,
                                std::span<const LinearPart> parts, int64_t M, int64_t K,
                                DType dtype, DType d_in_dtype) {
  // Parts after the first add into d_in: a sum kept in FP32.
  ST_CHECK(d_in_dtype == DType::f32 || (d_in_dtype == dtype && parts.size() == 1),
           "fused_linear_backward: d_in is FP32, or {} for one part", dtype_name(dtype));
  const int64_t width = total_width(parts);
  GemmOptions accumulate;
  accumulate.accumulate = true;
  int64_t column = 0;
  // d_in: the first part writes, the others add.
  for (const LinearPart& p : parts) {
    if (d_in)
      gemm(1, columns(g, dtype, M, width, column, p.N), MatView::row_major(p.weight, dtype, p.N, K),
           MatView::row_major(d_in, d_in_dtype, M, K), column == 0 ? GemmOptions{} : accumulate);
    column += p.N;
  }
  column = 0;
  for (const LinearPart& p : coalesced(parts, K, dtype)) {
    weight_grad_gemm(columns(g, dtype, M, width, column, p.N).t(),
                     MatView::row_major(in, dtype, M, K),
                     MatView::row_major(p.d_weight, DType::f32, p.N, K));
    if (p.d_bias) add_column_sums(p.d_bias, g, M, width, column, p.N, dtype);
    column += p.N;
  }
}

}  // namespace st
