#pragma once
// shardtrain's own GEMM, for CPUs where oneDNN has no BF16 matmul (and wherever it is the
// faster FP32 one). BLIS-style: B is packed into KC x NC panels and A into MC x KC blocks,
// and a register-blocked 6x16 micro-kernel (AVX2 + FMA, or a portable one) multiplies them.
// Packing reads FP32 or BF16 through any strides and widens BF16 to FP32 on the way (exact),
// so a BF16 matmul costs no FP32 copy of its operands: it reads half the bytes of an FP32 one
// and runs at FP32 matmul speed. Accumulation is FP32; a BF16 output is rounded to nearest
// even once, from the FP32 sum over all of K.
#include <cstddef>

#include "core/ops/matmul.hpp"

namespace st {

// The same contract as gemm(): C[b] = alpha * A[b]·B[b] + bias (+ C[b] when accumulating).
void packed_gemm(GemmBatch batch, const MatView& a, const MatView& b, const MatView& c,
                 const GemmOptions& options);

// Which micro-kernel packed_gemm runs: "avx2-fma" or "portable".
const char* packed_gemm_kernel_name();
// Forces the portable micro-kernel (tests compare the two); false restores the automatic choice.
void set_packed_gemm_portable(bool portable);

// Upper bound of the packing buffers packed_gemm keeps per OpenMP thread (they live as long as
// the thread and are reused by every call).
size_t packed_gemm_workspace_bytes_per_thread();

}  // namespace st
