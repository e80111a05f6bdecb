#pragma once
// Eight floats at a time with AVX2 + FMA: loads and stores of FP32 or BF16 (widened exactly,
// rounded to nearest even like f32_to_bf16, NaN kept quiet) and e^x. Only for functions that
// carry the same target attribute and run after cpu_features() said AVX2 and FMA are there.
#include <immintrin.h>

#include <cstdint>

#include "core/bf16.hpp"

namespace st::avx2 {

// Functions compiled for AVX2 + FMA whatever the build's -march; the inline ones are for them.
#define ST_AVX2_FN __attribute__((target("avx2,fma")))
#define ST_AVX2 __attribute__((target("avx2,fma"), always_inline)) inline

ST_AVX2 __m256 load8(const float* p) {
  return _mm256_loadu_ps(p);
}

ST_AVX2 __m256 load8(const bf16* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

ST_AVX2 void store8(float* p, __m256 v) {
  _mm256_storeu_ps(p, v);
}

// f32_to_bf16, lane by lane.
ST_AVX2 void store8(bf16* p, __m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i bias = _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, bias), 16);
  const __m256i magnitude = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  const __m256i nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000));
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  const __m256i h = _mm256_blendv_epi8(rounded, quiet, nan);
  const __m128i packed =
      _mm_packus_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
}

// fast_exp's polynomial (core/ops/fastmath.hpp) with x clamped to [-87, 88]; a NaN argument
// gives e^-87 (callers whose result multiplies x keep the NaN).
ST_AVX2 __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
  const __m256 shift = _mm256_set1_ps(12582912.0f);  // 1.5 * 2^23: rounds to an integer
  const __m256 n =
      _mm256_sub_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.4426950408889634f), shift), shift);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-06f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i exponent = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
  return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(exponent, 23)));
}

// out[i] = f(a[i], b[i]) for any n: the tail goes through zero-padded copies, so every element
// takes the same vector arithmetic (a result does not depend on where its row ends). Two
// vectors an iteration: their long dependency chains (e^x) overlap better.
template <class TOut, class TA, class TB, class F>
ST_AVX2 void zip8(TOut* out, const TA* a, const TB* b, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 x = f(load8(a + i), load8(b + i)), y = f(load8(a + i + 8), load8(b + i + 8));
    store8(out + i, x);
    store8(out + i + 8, y);
  }
  for (; i + 8 <= n; i += 8) store8(out + i, f(load8(a + i), load8(b + i)));
  if (i == n) return;
  TA a_tail[8] = {};
  TB b_tail[8] = {};
  TOut out_tail[8];
  for (int64_t k = 0; k < n - i; ++k) {
    a_tail[k] = a[i + k];
    b_tail[k] = b[i + k];
  }
  store8(out_tail, f(load8(a_tail), load8(b_tail)));
  for (int64_t k = 0; k < n - i; ++k) out[i + k] = out_tail[k];
}

// out[i] = f(in[i]) for any n, as zip8 does it.
template <class TOut, class TIn, class F>
ST_AVX2 void map8(TOut* out, const TIn* in, int64_t n, F f) {
  zip8(
      out, in, in,
      n, [&](__m256 x, __m256) __attribute__((target("avx2,fma"), always_inline)) { return f(x); });
}

}  // namespace st::avx2
