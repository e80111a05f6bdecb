#pragma once
// The subcommands of the shardtrain program.
#include <string>
#include <vector>

namespace st {

struct CommonOptions {
  std::string config = "tiny";  // a path or a bundled config name
  std::vector<std::string> overrides;
  bool json = false;
};

int run_train(const CommonOptions& options);

struct BenchStepOptions {
  int warmup = 3;
  int steps = 10;
};
int run_bench_step(const CommonOptions& options, const BenchStepOptions& bench);

}  // namespace st
