#include "core/bf16.hpp"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>

#include "core/bf16_avx512.hpp"
#include "core/cpu_features.hpp"
#include "core/error.hpp"

namespace st {
namespace {

void to_bf16_portable(const float* src, bf16* dst, size_t n) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void to_bf16_avx512(
    const float* src, bf16* dst, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        bf16_round16_native(_mm512_loadu_ps(src + i)));
  to_bf16_portable(src + i, dst + i, n - i);
}

std::atomic<Bf16Kernel> requested_kernel{Bf16Kernel::automatic};

Bf16Kernel resolve(Bf16Kernel k) {
  if (k == Bf16Kernel::automatic)
    return cpu_features().avx512_bf16 ? Bf16Kernel::avx512_bf16 : Bf16Kernel::portable;
  return k;
}

// Arrays smaller than this are converted on the calling thread.
constexpr size_t kParallelThreshold = 1 << 16;

}  // namespace

void set_bf16_kernel(Bf16Kernel kernel) {
  if (kernel == Bf16Kernel::avx512_bf16 && !cpu_features().avx512_bf16)
    fail("the AVX512-BF16 conversion kernel was requested but this CPU lacks AVX512-BF16");
  requested_kernel = kernel;
}

Bf16Kernel active_bf16_kernel() {
  return resolve(requested_kernel.load());
}

const char* bf16_kernel_name(Bf16Kernel kernel) {
  switch (kernel) {
    case Bf16Kernel::automatic:
      return "automatic";
    case Bf16Kernel::portable:
      return "portable";
    case Bf16Kernel::avx512_bf16:
      return "avx512-bf16";
  }
  return "?";
}

void convert_f32_to_bf16(const float* src, bf16* dst, size_t n) {
  auto kernel = active_bf16_kernel() == Bf16Kernel::avx512_bf16 ? to_bf16_avx512 : to_bf16_portable;
  if (n < kParallelThreshold || omp_in_parallel()) return kernel(src, dst, n);
#pragma omp parallel
  {
    const size_t threads = size_t(omp_get_num_threads());
    const size_t chunk = ((n + threads - 1) / threads + 15) / 16 * 16;
    const size_t begin = std::min(n, chunk * size_t(omp_get_thread_num()));
    const size_t end = std::min(n, begin + chunk);
    kernel(src + begin, dst + begin, end - begin);
  }
}

void convert_bf16_to_f32(const bf16* src, float* dst, size_t n) {
#pragma omp parallel for simd if (n >= kParallelThreshold && !omp_in_parallel())
  for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

}  // namespace st
