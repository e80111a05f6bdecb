#include "app/version.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <string>

#include "core/cpu_features.hpp"
#include "core/ops/matmul.hpp"

namespace st {

extern const char* const kBuildVersion;
extern const char* const kBuildCommit;
extern const char* const kBuildCompiler;

namespace {

// The MPI library's own version line (callable before MPI_Init), e.g. "Open MPI v4.1.4, ...".
std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return "unknown";
  std::string line(text, size_t(length));
  line = line.substr(0, line.find_first_of("\r\n"));
  return line.substr(0, line.find(", package"));
}

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
