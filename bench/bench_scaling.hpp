#pragma once
#include <string>
#include <vector>

namespace st {

struct ScalingOptions {
  std::string config = "tiny";
  std::vector<int> ranks = {1, 2, 4};
  int steps = 10;
  int warmup = 3;
  int repeats = 3;  // whole runs per row; the median run is reported
  bool json = false;
  std::vector<std::string> overrides;
};

// shardtrain bench scaling: runs `shardtrain bench step` under mpirun (through launch/shardrun)
// at each rank count with the same global batch, and tabulates tokens/s, step time split into
// compute and exposed communication, and per-rank peak memory beside its budget. The first
// row is also run as 1 rank x all cores without mpirun: the baseline the ratios compare to.
int run_bench_scaling(const ScalingOptions& options);

}  // namespace st
