#pragma once
// A directory of a multi-rank test that every rank names alike and no other job shares: it
// carries rank 0's pid (two test binaries, or one binary's runs for two model families, may run
// at once under CTest). Rank 0 empties it now and removes it at remove_shared_dirs() (which
// mpi_main calls once every test has run: a failed run's exit code makes mpirun end the ranks,
// maybe before their static destructors) or when the process ends.
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "collectives/mpi_process_group.hpp"
#include "core/tensor.hpp"

namespace st::testing {

struct SharedDirs {
  std::vector<std::string> dirs;
  void remove() {
    for (const auto& d : dirs) std::filesystem::remove_all(d);
    dirs.clear();
  }
  ~SharedDirs() { remove(); }
};
inline SharedDirs& shared_dirs() {
  static SharedDirs dirs;
  return dirs;
}
inline void remove_shared_dirs() {
  shared_dirs().remove();
}

inline std::string shared_dir(MpiProcessGroup& group, const std::string& what) {
  SharedDirs& cleanup = shared_dirs();
  Tensor pid = Tensor::zeros("pid", {1}, DType::f64);
  if (group.rank() == 0) pid.data<double>()[0] = double(getpid());
  group.all_reduce(pid)->wait();
  const std::string dir =
      fmt::format("/tmp/shardtrain-test-{}-{}", int64_t(pid.data<double>()[0]), what);
  if (group.rank() == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    cleanup.dirs.push_back(dir);
  }
  group.barrier()->wait();
  return dir;
}

}  // namespace st::testing
