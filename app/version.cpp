#include "app/version.hpp"

#include <fmt/format.h>

#include <string>

#include "collectives/mpi_runtime.hpp"
#include "core/cpu_features.hpp"
#include "core/ops/matmul.hpp"

namespace st {

extern const char* const kBuildVersion;
extern const char* const kBuildCommit;
extern const char* const kBuildCompiler;

namespace {

std::string cpu_line() {
  const CpuFeatures& cpu = cpu_features();
  return fmt::format("{} | {}", cpu.brand.empty() ? "unknown" : cpu.brand, cpu.summary());
}

}  // namespace

std::string version_text() {
  return fmt::format(
      "shardtrain {}\ncommit: {}\ncompiler: {} (C++20){}\noneDNN: {}\nMPI: {}\ncpu: {}",
      kBuildVersion, kBuildCommit, kBuildCompiler,
#ifdef SHARDTRAIN_PORTABLE_BUILD
      ", portable x86-64 build",
#else
      ", built for the build machine's CPU (-march=native)",
#endif
      onednn_version(), mpi_library_version(), cpu_line());
}

}  // namespace st
