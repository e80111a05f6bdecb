#include "core/ops/gelu.hpp"

#include <algorithm>

#include "core/op_profile.hpp"
#include "core/ops/avx2_math.hpp"
#include "core/ops/elementwise.hpp"

namespace st {
namespace {

template <class T>
void gelu_row_portable(T* __restrict y, const T* __restrict x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = from_f32<T>(gelu(to_f32(x[i])));
}

template <class T>
void gelu_grad_row_portable(float* d_in, const float* d_out, const T* __restrict pre, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) d_in[i] = d_out[i] * gelu_grad(to_f32(pre[i]));
}

// The scalar formulas above, eight lanes at a time: s, and r = 1 - s.
ST_AVX2 __m256 gelu_s8(__m256 x, __m256 x2, __m256* r) {
  const __m256 inner = _mm256_fmadd_ps(_mm256_mul_ps(x2, _mm256_set1_ps(kGeluCubic)), x, x);
  const __m256 e = avx2::exp8(_mm256_mul_ps(inner, _mm256_set1_ps(2.0f * kGeluSqrt2OverPi)));
  const __m256 one = _mm256_set1_ps(1.0f);
  *r = _mm256_div_ps(one, _mm256_add_ps(e, one));
  return _mm256_blendv_ps(_mm256_mul_ps(e, *r), _mm256_sub_ps(one, *r),
                          _mm256_cmp_ps(e, one, _CMP_GE_OQ));
}

template <class T>
ST_AVX2_FN void gelu_row_avx2(T* y, const T* x, int64_t n) {
  avx2::map8(
      y, x, n, [](__m256 v) __attribute__((target("avx2,fma"), always_inline)) {
        __m256 r;
        return _mm256_mul_ps(v, gelu_s8(v, _mm256_mul_ps(v, v), &r));
      });
}

template <class T>
ST_AVX2_FN void gelu_grad_row_avx2(float* d_in, const float* d_out, const T* pre, int64_t n) {
  avx2::zip8(
      d_in, d_out, pre, n,
      [](__m256 g, __m256 x) __attribute__((target("avx2,fma"), always_inline)) {
        const __m256 x2 = _mm256_mul_ps(x, x);
        __m256 r;
        const __m256 s = gelu_s8(x, x2, &r);
        const __m256 du = _mm256_mul_ps(
            _mm256_fmadd_ps(x2, _mm256_set1_ps(3.0f * kGeluCubic), _mm256_set1_ps(1.0f)),
            _mm256_set1_ps(kGeluSqrt2OverPi));
        const __m256 slope =
            _mm256_mul_ps(_mm256_mul_ps(_mm256_add_ps(x, x), s), _mm256_mul_ps(r, du));
        return _mm256_mul_ps(g, _mm256_add_ps(s, slope));
      });
}

// Rows of this many elements per OpenMP chunk.
constexpr int64_t kChunk = 4096;

template <class T>
void gelu_forward_kernel(T* y, const T* x, int64_t n) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t i = c * kChunk;
    gelu_row(y + i, x + i, std::min(kChunk, n - i));
  }
}

template <class T>
void gelu_backward_kernel(float* d_in, const float* d_out, const T* x, int64_t n) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t i = c * kChunk;
    gelu_grad_row(d_in + i, d_out + i, x + i, std::min(kChunk, n - i));
  }
}

}  // namespace

void gelu_row(float* y, const float* x, int64_t n) {
  elementwise_avx2() ? gelu_row_avx2(y, x, n) : gelu_row_portable(y, x, n);
}
void gelu_row(bf16* y, const bf16* x, int64_t n) {
  elementwise_avx2() ? gelu_row_avx2(y, x, n) : gelu_row_portable(y, x, n);
}
void gelu_grad_row(float* d_in, const float* d_out, const float* pre, int64_t n) {
  elementwise_avx2() ? gelu_grad_row_avx2(d_in, d_out, pre, n)
                     : gelu_grad_row_portable(d_in, d_out, pre, n);
}
void gelu_grad_row(float* d_in, const float* d_out, const bf16* pre, int64_t n) {
  elementwise_avx2() ? gelu_grad_row_avx2(d_in, d_out, pre, n)
                     : gelu_grad_row_portable(d_in, d_out, pre, n);
}

void gelu_forward(void* out, const void* in, size_t n, DType dtype) {
  OpScope scope(OpKind::gelu);
  dispatch_float(dtype, [&]<class T>(T) {
    gelu_forward_kernel(static_cast<T*>(out), static_cast<const T*>(in), int64_t(n));
  });
}

void gelu_backward(float* d_in, const float* d_out, const void* in, size_t n, DType dtype) {
  OpScope scope(OpKind::gelu);
  dispatch_float(dtype, [&]<class T>(T) {
    gelu_backward_kernel(d_in, d_out, static_cast<const T*>(in), int64_t(n));
  });
}

}  // namespace st
