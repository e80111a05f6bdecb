#include "core/cpu_features.hpp"

#include <cpuid.h>

#include <cstdint>

namespace st {
namespace {

uint64_t xgetbv0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t(edx) << 32) | eax;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27);
  if (!osxsave) return f;
  const uint64_t xcr0 = xgetbv0();
  const bool os_avx = (xcr0 & 0x6) == 0x6;
  const bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;
  const bool os_amx = (xcr0 & (3ull << 17)) == (3ull << 17);
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  f.avx2 = os_avx && (b & (1u << 5));
  f.avx512f = os_avx512 && (b & (1u << 16));
  f.avx512bw = os_avx512 && (b & (1u << 30));
  f.avx512vl = os_avx512 && (b & (1u << 31));
  f.amx_bf16 = os_amx && (d & (1u << 22));
  f.amx_tile = os_amx && (d & (1u << 24));
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx512_bf16 = os_avx512 && (a & (1u << 5));
  return f;
}

}  // namespace

std::string CpuFeatures::summary() const {
  std::string s;
  s += avx2 ? "AVX2" : "no AVX2";
  s += avx512f ? " AVX512F" : " no-AVX512";
  s += avx512_bf16 ? " AVX512-BF16" : " no-AVX512-BF16";
  s += (amx_tile && amx_bf16) ? " AMX-BF16" : " no-AMX";
  return s;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

}  // namespace st
