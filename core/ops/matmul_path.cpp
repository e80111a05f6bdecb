#include "core/ops/matmul_path.hpp"

#include <atomic>

#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "core/ops/matmul.hpp"
#include "core/ops/packed_gemm.hpp"

namespace st {
namespace {

std::atomic<Bf16MatmulPath> requested{Bf16MatmulPath::automatic};
std::atomic<Fp32MatmulEngine> requested_engine{Fp32MatmulEngine::automatic};

}  // namespace

const char* bf16_matmul_path_name(Bf16MatmulPath path) {
  switch (path) {
    case Bf16MatmulPath::automatic:
      return "auto";
    case Bf16MatmulPath::native:
      return "native";
    case Bf16MatmulPath::widened:
      return "widened";
  }
  return "?";
}

bool native_bf16_matmul_available() {
  // oneDNN 2.6 has BF16 matmul from AVX512-core (F, BW, VL) up; below, creation fails.
  static const bool available = onednn_bf16_matmul_impl().rfind("unavailable", 0) != 0;
  return available;
}

bool native_bf16_matmul_fast() {
  const CpuFeatures& f = cpu_features();
  return native_bf16_matmul_available() && (f.avx512_bf16 || (f.amx_tile && f.amx_bf16));
}

void check_bf16_matmul_path(Bf16MatmulPath path) {
  if (path == Bf16MatmulPath::native && !native_bf16_matmul_available())
    fail_input(
        "precision.bf16_matmul = native: this CPU has no native BF16 matmul (oneDNN {} needs "
        "AVX512-core, and AVX512-BF16 or AMX to be fast; this CPU: {}). Use auto (widened to "
        "FP32 here, same values) or widened",
        onednn_version(), cpu_features().summary());
}

void set_bf16_matmul_path(Bf16MatmulPath path) {
  check_bf16_matmul_path(path);
  requested = path;
}

Bf16MatmulPath active_bf16_matmul_path() {
  const Bf16MatmulPath path = requested.load();
  if (path != Bf16MatmulPath::automatic) return path;
  return native_bf16_matmul_fast() ? Bf16MatmulPath::native : Bf16MatmulPath::widened;
}

std::string bf16_matmul_path_summary() {
  const Bf16MatmulPath path = active_bf16_matmul_path();
  const bool chosen = requested.load() != Bf16MatmulPath::automatic;
  if (path == Bf16MatmulPath::native)
    return std::string("native ") + onednn_bf16_matmul_impl() +
           (native_bf16_matmul_fast() ? "" : " (no AVX512-BF16 or AMX: emulated, slow)");
  if (chosen) return "widened to fp32 (precision.bf16_matmul=widened)";
  return native_bf16_matmul_available() ? "widened to fp32 (no AVX512-BF16 or AMX on this CPU)"
                                        : "widened to fp32 (no AVX512-BF16 on this CPU)";
}

const char* fp32_matmul_engine_name(Fp32MatmulEngine engine) {
  switch (engine) {
    case Fp32MatmulEngine::automatic:
      return "auto";
    case Fp32MatmulEngine::onednn:
      return "onednn";
    case Fp32MatmulEngine::packed:
      return "packed";
  }
  return "?";
}

void set_fp32_matmul_engine(Fp32MatmulEngine engine) {
  requested_engine = engine;
}

Fp32MatmulEngine active_fp32_matmul_engine() {
  const Fp32MatmulEngine engine = requested_engine.load();
  if (engine != Fp32MatmulEngine::automatic) return engine;
  const CpuFeatures& f = cpu_features();
  return f.avx2 && f.fma && !f.avx512f ? Fp32MatmulEngine::packed : Fp32MatmulEngine::onednn;
}

std::string fp32_matmul_summary() {
  if (packed_gemm_runs(DType::f32)) return std::string("packed ") + packed_gemm_kernel_name();
  return "oneDNN " + onednn_fp32_matmul_impl();
}

bool packed_gemm_runs(DType dtype) {
  return dtype == DType::bf16 ? active_bf16_matmul_path() == Bf16MatmulPath::widened
                              : active_fp32_matmul_engine() == Fp32MatmulEngine::packed;
}

std::string matmul_identity(DType dtype) {
  const std::string packed = std::string("packed-") + packed_gemm_kernel_name();
  if (dtype == DType::bf16)
    return packed_gemm_runs(dtype) ? "bf16 widened " + packed : "bf16 native";
  return packed_gemm_runs(dtype) ? "fp32 " + packed : "fp32 onednn";
}

DType compute_dtype_of_matmul(DType dtype) {
  return dtype == DType::bf16 && packed_gemm_runs(dtype) ? DType::f32 : dtype;
}

}  // namespace st
