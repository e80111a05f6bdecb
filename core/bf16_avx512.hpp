#pragma once
// f32_to_bf16 on sixteen lanes through VCVTNEPS2BF16, for code built for AVX512-BF16 (chosen at
// run time, or by -march on such a CPU). The instruction rounds to nearest even and quiets NaNs
// exactly like f32_to_bf16 but flushes subnormal inputs to zero: lanes holding one are
// recomputed with the integer formula, so the bits are the scalar definition's.
#include <immintrin.h>

namespace st {

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"), always_inline)) inline __m256i
bf16_round16_native(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  __m256i h = (__m256i)_mm512_cvtneps_pbh(x);
  const __m512i exponent_mask = _mm512_set1_epi32(0x7f800000);
  const __m512i mantissa_mask = _mm512_set1_epi32(0x007fffff);
  const __mmask16 subnormal =
      _mm512_cmpeq_epi32_mask(_mm512_and_si512(u, exponent_mask), _mm512_setzero_si512()) &
      _mm512_cmpneq_epi32_mask(_mm512_and_si512(u, mantissa_mask), _mm512_setzero_si512());
  if (subnormal) {
    // maskz/mask forms with explicit sources: the unmasked intrinsics trip GCC 12's
    // -Wmaybe-uninitialized on _mm512_undefined_*().
    const __mmask16 all = 0xffff;
    const __m512i one = _mm512_set1_epi32(1);
    const __m512i lsb = _mm512_and_si512(_mm512_maskz_srli_epi32(all, u, 16), one);
    const __m512i bias = _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb);
    const __m512i rounded = _mm512_maskz_srli_epi32(all, _mm512_add_epi32(u, bias), 16);
    h = _mm512_mask_cvtepi32_epi16(h, subnormal, rounded);
  }
  return h;
}

}  // namespace st
