#include "core/ops/swiglu.hpp"

#include <algorithm>

#include "core/op_profile.hpp"
#include "core/ops/avx2_math.hpp"
#include "core/ops/avx512_math.hpp"
#include "core/ops/elementwise.hpp"
#include "core/ops/fastmath.hpp"

namespace st {
namespace {

inline float sigmoid(float x) {
  return 1.0f / (1.0f + fast_exp(-x));
}

template <class T>
void forward_row_portable(T* __restrict y, const T* __restrict g, const T* __restrict u,
                          int64_t F) {
#pragma omp simd
  for (int64_t c = 0; c < F; ++c) {
    const float gc = to_f32(g[c]);
    y[c] = from_f32<T>(gc * sigmoid(gc) * to_f32(u[c]));
  }
}

template <class T, class D>
void backward_row_portable(T* __restrict dg, T* __restrict du, const D* __restrict dy,
                           const T* __restrict g, const T* __restrict u, int64_t F) {
#pragma omp simd
  for (int64_t c = 0; c < F; ++c) {
    const float gc = to_f32(g[c]), s = sigmoid(gc);
    // silu'(g) = s + g·s·(1 − s)
    dg[c] = from_f32<T>(to_f32(dy[c]) * to_f32(u[c]) * s * (1.0f + gc * (1.0f - s)));
    du[c] = from_f32<T>(to_f32(dy[c]) * gc * s);
  }
}

ST_AVX2 __m256 sigmoid8(__m256 g) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, avx2::exp8(_mm256_sub_ps(_mm256_setzero_ps(), g))));
}

// The kernels' lambdas capture by reference though they use nothing: a capture-less lambda
// gets a function-pointer thunk that GCC builds without the target attribute, which in a
// portable build (-march=x86-64) warns that its vector arguments change the ABI.
template <class T>
ST_AVX2_FN void forward_row_avx2(T* y, const T* g, const T* u, int64_t F) {
  avx2::zip8(
      y, g, u, F, [&](__m256 gv, __m256 uv) __attribute__((target("avx2,fma"), always_inline)) {
        return _mm256_mul_ps(_mm256_mul_ps(gv, sigmoid8(gv)), uv);
      });
}

// Eight columns from c: the gradients of gate and up.
template <class T, class D>
ST_AVX2_FN void backward8(T* dg, T* du, const D* dy, const T* g, const T* u) {
  const __m256 gv = avx2::load8(g), uv = avx2::load8(u), dyv = avx2::load8(dy);
  const __m256 s = sigmoid8(gv);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 slope = _mm256_fmadd_ps(gv, _mm256_sub_ps(one, s), one);  // 1 + g (1 - s)
  avx2::store8(dg, _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(dyv, uv), s), slope));
  avx2::store8(du, _mm256_mul_ps(_mm256_mul_ps(dyv, gv), s));
}

template <class T, class D>
ST_AVX2_FN void backward_row_avx2(T* dg, T* du, const D* dy, const T* g, const T* u, int64_t F) {
  int64_t c = 0;
  for (; c + 8 <= F; c += 8) backward8(dg + c, du + c, dy + c, g + c, u + c);
  if (c == F) return;
  // The tail through zero-padded copies, with the same arithmetic.
  T g_tail[8] = {}, u_tail[8] = {}, dg_tail[8], du_tail[8];
  D dy_tail[8] = {};
  const int64_t n = F - c;
  std::copy(g + c, g + F, g_tail);
  std::copy(u + c, u + F, u_tail);
  std::copy(dy + c, dy + F, dy_tail);
  backward8(dg_tail, du_tail, dy_tail, g_tail, u_tail);
  std::copy(dg_tail, dg_tail + n, dg + c);
  std::copy(du_tail, du_tail + n, du + c);
}

// The AVX2 kernels on sixteen lanes, the same operations in the same order.
ST_AVX512 __m512 sigmoid16(__m512 g) {
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_div_ps(one,
                       _mm512_add_ps(one, avx512::exp16(_mm512_sub_ps(_mm512_setzero_ps(), g))));
}

template <class T>
ST_AVX512_FN void forward_row_avx512(T* y, const T* g, const T* u, int64_t F) {
  avx512::zip16(
      y, g, u, F, [&](__m512 gv, __m512 uv) __attribute__((target("avx512f,fma"), always_inline)) {
        return _mm512_mul_ps(_mm512_mul_ps(gv, sigmoid16(gv)), uv);
      });
}

template <class T, class D>
ST_AVX512_FN void backward16(T* dg, T* du, const D* dy, const T* g, const T* u) {
  const __m512 gv = avx512::load16(g), uv = avx512::load16(u), dyv = avx512::load16(dy);
  const __m512 s = sigmoid16(gv);
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 slope = _mm512_fmadd_ps(gv, _mm512_sub_ps(one, s), one);  // 1 + g (1 - s)
  avx512::store16(dg, _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(dyv, uv), s), slope));
  avx512::store16(du, _mm512_mul_ps(_mm512_mul_ps(dyv, gv), s));
}

template <class T, class D>
ST_AVX512_FN void backward_row_avx512(T* dg, T* du, const D* dy, const T* g, const T* u,
                                      int64_t F) {
  int64_t c = 0;
  for (; c + 16 <= F; c += 16) backward16(dg + c, du + c, dy + c, g + c, u + c);
  if (c == F) return;
  T g_tail[16] = {}, u_tail[16] = {}, dg_tail[16], du_tail[16];
  D dy_tail[16] = {};
  const int64_t n = F - c;
  std::copy(g + c, g + F, g_tail);
  std::copy(u + c, u + F, u_tail);
  std::copy(dy + c, dy + F, dy_tail);
  backward16(dg_tail, du_tail, dy_tail, g_tail, u_tail);
  std::copy(dg_tail, dg_tail + n, dg + c);
  std::copy(du_tail, du_tail + n, du + c);
}

template <class T>
void forward_rows(T* out, const T* gate_up, int64_t M, int64_t F) {
  const VectorTier tier = elementwise_tier();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    const T* g = gate_up + i * 2 * F;
    T* y = out + i * F;
    if (tier == VectorTier::avx512)
      forward_row_avx512(y, g, g + F, F);
    else if (tier == VectorTier::avx2)
      forward_row_avx2(y, g, g + F, F);
    else
      forward_row_portable(y, g, g + F, F);
  }
}

template <class T, class D>
void backward_rows(T* d_gate_up, const D* d_out, const T* gate_up, int64_t M, int64_t F) {
  const VectorTier tier = elementwise_tier();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    const T* g = gate_up + i * 2 * F;
    T* dg = d_gate_up + i * 2 * F;
    const D* dy = d_out + i * F;
    if (tier == VectorTier::avx512)
      backward_row_avx512(dg, dg + F, dy, g, g + F, F);
    else if (tier == VectorTier::avx2)
      backward_row_avx2(dg, dg + F, dy, g, g + F, F);
    else
      backward_row_portable(dg, dg + F, dy, g, g + F, F);
  }
}

}  // namespace

void swiglu_forward(void* out, const void* gate_up, int64_t M, int64_t F, DType dtype) {
  OpScope scope(OpKind::swiglu);
  dispatch_float(dtype, [&]<class T>(T) {
    forward_rows(static_cast<T*>(out), static_cast<const T*>(gate_up), M, F);
  });
}

void swiglu_backward(void* d_gate_up, const void* d_out, const void* gate_up, int64_t M, int64_t F,
                     DType dtype, DType d_out_dtype) {
  OpScope scope(OpKind::swiglu);
  ST_CHECK(d_out_dtype == DType::f32 || d_out_dtype == dtype,
           "swiglu_backward: the output gradient is FP32 or {}", dtype_name(dtype));
  dispatch_float(dtype, [&]<class T>(T) {
    T* d = static_cast<T*>(d_gate_up);
    const T* x = static_cast<const T*>(gate_up);
    if (d_out_dtype == DType::f32)
      backward_rows(d, static_cast<const float*>(d_out), x, M, F);
    else
      backward_rows(d, static_cast<const T*>(d_out), x, M, F);
  });
}

}  // namespace st
