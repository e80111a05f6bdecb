#pragma once
#include "launch/commands.hpp"

namespace st {

// shardtrain bench checkpoint (under mpirun): save and load of the config's model with AdamW
// state at this world size, beside writing the same bytes with plain write + fsync (the limit);
// medians of `repeats`, slowest rank.
int run_bench_checkpoint(const CommonOptions& options, int repeats, const std::string& dir);

}  // namespace st
