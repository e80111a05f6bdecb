#pragma once
// shardtrain simulate calibrate: measures this machine for the simulator (compute per unit from
// the runtime's own trace spans; α-β of its collectives over shared memory and emulated TCP
// hosts) and writes a calibration profile (simulate/profile.hpp).
#include <cstdio>
#include <string>
#include <vector>

#include "launch/commands.hpp"

namespace st {

struct CalibrateOptions {
  CommonOptions common;
  std::string out;
  std::vector<int> ranks = {1, 2, 4};    // ranks computing at once (threads: cores / ranks)
  std::vector<int> rows = {1, 2, 4, 8};  // per rank, up to training.global_batch / ranks
  int steps = 3;
  long long max_bytes = 16ll << 20;
  bool tcp = false;                            // also emulated hosts (needs root: ip netns, tc)
  std::vector<double> link_gbit = {1, 2, 10};  // capped TCP links to fit as well (with --tcp)
  std::vector<int> link_ranks = {2, 4};        // ranks each link class is measured at
  std::string links_from;      // take the links of this profile instead of measuring
  std::FILE* report = stdout;  // the closing line (stderr when `simulate` calibrates on first use)
};
int run_calibrate(const CalibrateOptions& options);

}  // namespace st
