#include "core/ops/elementwise.hpp"

#include <atomic>
#include <cstring>

#include "core/cpu_features.hpp"
#include "core/op_profile.hpp"

namespace st {
namespace {

std::atomic<bool> force_portable{false};

}  // namespace

bool elementwise_avx2() {
  static const bool available = cpu_features().avx2 && cpu_features().fma;
  return available && !force_portable.load(std::memory_order_relaxed);
}

void set_elementwise_portable(bool portable) {
  force_portable = portable;
}

const char* elementwise_kernel_name() {
  return elementwise_avx2() ? "avx2-fma" : "portable";
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
    const T* yt = static_cast<const T*>(y);
#pragma omp parallel for simd schedule(static) if (n > 32768)
    for (size_t i = 0; i < n; ++i) out[i] = x[i] + to_f32(yt[i]);
  });
}

}  // namespace st
