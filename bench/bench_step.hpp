#pragma once
// shardtrain bench step: forward, backward and optimizer time of the config's model at this
// world size (medians), tokens/s and MFU against the matmul peak measured at start-up.
#include "launch/commands.hpp"

namespace st {

struct BenchStepOptions {
  int warmup = 3;
  int steps = 10;
};
int run_bench_step(const CommonOptions& options, const BenchStepOptions& bench);

}  // namespace st
