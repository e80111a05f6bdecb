#include "core/ops/elementwise.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/cpu_features.hpp"
#include "core/op_profile.hpp"

namespace st {
namespace {

std::atomic<VectorTier> cap_tier{VectorTier::avx512};

}  // namespace

VectorTier best_elementwise_tier() {
  static const VectorTier best = cpu_features().avx512f && cpu_features().fma ? VectorTier::avx512
                                 : cpu_features().avx2 && cpu_features().fma  ? VectorTier::avx2
                                                                             : VectorTier::portable;
  return best;
}

VectorTier elementwise_tier() {
  return std::min(best_elementwise_tier(), cap_tier.load(std::memory_order_relaxed));
}

void set_elementwise_cap(VectorTier cap) {
  cap_tier = cap;
}

const char* vector_tier_name(VectorTier tier) {
  switch (tier) {
    case VectorTier::avx512:
      return "avx512";
    case VectorTier::avx2:
      return "avx2-fma";
    case VectorTier::portable:
      return "portable";
  }
  return "?";
}

void cast(const void* src, DType src_dtype, void* dst, DType dst_dtype, size_t n) {
  OpScope scope(OpKind::cast_copy);
  if (src_dtype == dst_dtype) {
    if (src != dst) std::memcpy(dst, src, n * dtype_size(src_dtype));
  } else if (src_dtype == DType::f32 && dst_dtype == DType::bf16) {
    convert_f32_to_bf16(static_cast<const float*>(src), static_cast<bf16*>(dst), n);
  } else if (src_dtype == DType::bf16 && dst_dtype == DType::f32) {
    convert_bf16_to_f32(static_cast<const bf16*>(src), static_cast<float*>(dst), n);
  } else {
    fail("cast from {} to {} is not supported", dtype_name(src_dtype), dtype_name(dst_dtype));
  }
}

void residual_add(float* out, const float* x, const void* y, DType dtype, size_t n) {
  OpScope scope(OpKind::cast_copy);
  dispatch_float(dtype, [&]<class T>(T) {
    // Local copies: pointers captured by reference are reloaded in the OpenMP body, and GCC
    // then vectorized the loop with gathers (5x slower than loads on the Zen 4 EPYC).
    float* o = out;  // may be x
    const float* a = x;
    const T* b = static_cast<const T*>(y);
    const int64_t count = int64_t(n);
#pragma omp parallel for simd schedule(static) if (count > 32768)
    for (int64_t i = 0; i < count; ++i) o[i] = a[i] + to_f32(b[i]);
  });
}

}  // namespace st
