#include "core/ops/gelu.hpp"

#include <algorithm>

#include "core/op_profile.hpp"
#include "core/ops/avx2_math.hpp"
#include "core/ops/avx512_math.hpp"
#include "core/ops/elementwise.hpp"

namespace st {
namespace {

template <class T>
void gelu_row_portable(T* __restrict y, const T* __restrict x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = from_f32<T>(gelu(to_f32(x[i])));
}

template <class D, class T>
void gelu_grad_row_portable(float* d_in, const D* d_out, const T* __restrict pre, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) d_in[i] = to_f32(d_out[i]) * gelu_grad(to_f32(pre[i]));
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

// The kernels' lambdas capture by reference though they use nothing: a capture-less lambda
// gets a function-pointer thunk that GCC builds without the target attribute, which in a
// portable build (-march=x86-64) warns that its vector arguments change the ABI.
template <class T>
ST_AVX2_FN void gelu_row_avx2(T* y, const T* x, int64_t n) {
  avx2::map8(
      y, x, n, [&](__m256 v) __attribute__((target("avx2,fma"), always_inline)) {
        __m256 r;
        return _mm256_mul_ps(v, gelu_s8(v, _mm256_mul_ps(v, v), &r));
      });
}

template <class D, class T>
ST_AVX2_FN void gelu_grad_row_avx2(float* d_in, const D* d_out, const T* pre, int64_t n) {
  avx2::zip8(
      d_in, d_out, pre,
      n, [&](__m256 g, __m256 x) __attribute__((target("avx2,fma"), always_inline)) {
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

// gelu_s8 and the AVX2 row kernels on sixteen lanes, the same operations in the same order.
ST_AVX512 __m512 gelu_s16(__m512 x, __m512 x2, __m512* r) {
  const __m512 inner = _mm512_fmadd_ps(_mm512_mul_ps(x2, _mm512_set1_ps(kGeluCubic)), x, x);
  const __m512 e = avx512::exp16(_mm512_mul_ps(inner, _mm512_set1_ps(2.0f * kGeluSqrt2OverPi)));
  const __m512 one = _mm512_set1_ps(1.0f);
  *r = _mm512_div_ps(one, _mm512_add_ps(e, one));
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(e, one, _CMP_GE_OQ), _mm512_mul_ps(e, *r),
                              _mm512_sub_ps(one, *r));
}

template <class T>
ST_AVX512_FN void gelu_row_avx512(T* y, const T* x, int64_t n) {
  avx512::map16(
      y, x, n, [&](__m512 v) __attribute__((target("avx512f,fma"), always_inline)) {
        __m512 r;
        return _mm512_mul_ps(v, gelu_s16(v, _mm512_mul_ps(v, v), &r));
      });
}

template <class D, class T>
ST_AVX512_FN void gelu_grad_row_avx512(float* d_in, const D* d_out, const T* pre, int64_t n) {
  avx512::zip16(
      d_in, d_out, pre,
      n, [&](__m512 g, __m512 x) __attribute__((target("avx512f,fma"), always_inline)) {
        const __m512 x2 = _mm512_mul_ps(x, x);
        __m512 r;
        const __m512 s = gelu_s16(x, x2, &r);
        const __m512 du = _mm512_mul_ps(
            _mm512_fmadd_ps(x2, _mm512_set1_ps(3.0f * kGeluCubic), _mm512_set1_ps(1.0f)),
            _mm512_set1_ps(kGeluSqrt2OverPi));
        const __m512 slope =
            _mm512_mul_ps(_mm512_mul_ps(_mm512_add_ps(x, x), s), _mm512_mul_ps(r, du));
        return _mm512_mul_ps(g, _mm512_add_ps(s, slope));
      });
}

// The row functions' one choice of tier.
template <class T>
void gelu_row_any(T* y, const T* x, int64_t n) {
  switch (elementwise_tier()) {
    case VectorTier::avx512:
      return gelu_row_avx512(y, x, n);
    case VectorTier::avx2:
      return gelu_row_avx2(y, x, n);
    case VectorTier::portable:
      return gelu_row_portable(y, x, n);
  }
}

template <class D, class T>
void gelu_grad_row_any(float* d_in, const D* d_out, const T* pre, int64_t n) {
  switch (elementwise_tier()) {
    case VectorTier::avx512:
      return gelu_grad_row_avx512(d_in, d_out, pre, n);
    case VectorTier::avx2:
      return gelu_grad_row_avx2(d_in, d_out, pre, n);
    case VectorTier::portable:
      return gelu_grad_row_portable(d_in, d_out, pre, n);
  }
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
  gelu_row_any(y, x, n);
}
void gelu_row(bf16* y, const bf16* x, int64_t n) {
  gelu_row_any(y, x, n);
}
void gelu_grad_row(float* d_in, const float* d_out, const float* pre, int64_t n) {
  gelu_grad_row_any(d_in, d_out, pre, n);
}
void gelu_grad_row(float* d_in, const float* d_out, const bf16* pre, int64_t n) {
  gelu_grad_row_any(d_in, d_out, pre, n);
}
void gelu_grad_row(float* d_in, const bf16* d_out, const bf16* pre, int64_t n) {
  gelu_grad_row_any(d_in, d_out, pre, n);
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
