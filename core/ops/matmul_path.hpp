#pragma once
// How a matmul with BF16 operands runs. `native`: oneDNN's BF16 matmul, which exists on CPUs
// with AVX512-core and is fast with AVX512-BF16 or AMX. `widened`: the BF16 inputs are widened
// to FP32 (exact) and multiplied by the FP32 matmul, accumulating in FP32; a BF16 output is
// rounded to nearest even. Both give the same values up to accumulation order.
#include <string>

#include "core/dtype.hpp"

namespace st {

enum class Bf16MatmulPath { automatic, native, widened };

const char* bf16_matmul_path_name(Bf16MatmulPath path);

// Whether oneDNN can create a BF16 matmul on this CPU at all (AVX512-core or better).
bool native_bf16_matmul_available();
// Whether the CPU has BF16 instructions that make the native path fast (AVX512-BF16 or AMX).
bool native_bf16_matmul_fast();

// Throws st::InputError naming the key and the missing instruction set when `path` is `native`
// and oneDNN has no BF16 matmul on this CPU.
void check_bf16_matmul_path(Bf16MatmulPath path);
// `automatic` picks native where it is fast, widened elsewhere. Checks `path` first.
void set_bf16_matmul_path(Bf16MatmulPath path);
Bf16MatmulPath active_bf16_matmul_path();  // never `automatic`

// For the start-up summary, e.g. "widened to fp32 (no AVX512-BF16 on this CPU)".
std::string bf16_matmul_path_summary();

// Which FP32 matmul runs (FP32 operands, and the widened BF16 path's arithmetic). `automatic`:
// shardtrain's packed GEMM on CPUs with AVX2 + FMA and no AVX-512 (measured faster than
// oneDNN's at the models' shapes there: see the README), oneDNN elsewhere.
enum class Fp32MatmulEngine { automatic, onednn, packed };
const char* fp32_matmul_engine_name(Fp32MatmulEngine engine);
void set_fp32_matmul_engine(Fp32MatmulEngine engine);
Fp32MatmulEngine active_fp32_matmul_engine();  // never `automatic`
// e.g. "packed avx2-fma" or "oneDNN gemm:jit".
std::string fp32_matmul_summary();

// What runs a matmul of `dtype` operands here, as a calibration profile records it:
// "bf16 native", "bf16 widened packed-avx2-fma", "fp32 onednn", "fp32 packed-portable", ...
std::string matmul_identity(DType dtype);

// Whether matmuls with operands of `dtype` (bf16 when any operand is) run on the packed GEMM:
// widened BF16, or the packed FP32 engine.
bool packed_gemm_runs(DType dtype);

// The dtype whose matmul actually runs for operands of `dtype`: FP32 when BF16 is widened.
// MFU's denominator is that matmul's peak.
DType compute_dtype_of_matmul(DType dtype);

}  // namespace st
