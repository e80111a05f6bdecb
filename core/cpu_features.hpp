#pragma once
#include <string>

namespace st {

// What this CPU (and the OS, for the AVX512/AMX register state) supports.
struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512_bf16 = false;
  bool amx_tile = false;
  bool amx_bf16 = false;

  std::string brand;  // the processor's brand string, e.g. "AMD EPYC 7B13 64-Core Processor"

  // One line for the start-up banner, e.g. "AVX512F AVX512-BF16 (no AMX)".
  std::string summary() const;
};

const CpuFeatures& cpu_features();

}  // namespace st
