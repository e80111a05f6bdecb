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

std::string brand_string() {
  unsigned regs[12] = {};
  for (unsigned i = 0; i < 3; ++i)
    if (!__get_cpuid(0x80000002u + i, &regs[4 * i], &regs[4 * i + 1], &regs[4 * i + 2],
                     &regs[4 * i + 3]))
      return "unknown CPU";
  std::string s(reinterpret_cast<const char*>(regs), sizeof(regs));
  s = s.substr(0, s.find('\0'));
  const size_t first = s.find_first_not_of(' '), last = s.find_last_not_of(' ');
  return first == std::string::npos ? "unknown CPU" : s.substr(first, last - first + 1);
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27);
  if (!osxsave) return f;
  const uint64_t xcr0 = xgetbv0();
  const bool os_avx = (xcr0 & 0x6) == 0x6;
  f.fma = os_avx && (c & (1u << 12));
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
  f.brand = brand_string();
  return f;
}

}  // namespace

std::string CpuFeatures::summary() const {
  std::string s;
  s += avx2 ? "AVX2" : "no AVX2";
  s += fma ? " FMA" : " no-FMA";
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
