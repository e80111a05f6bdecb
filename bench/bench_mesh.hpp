#pragma once
// shardtrain bench mesh: the config at `ranks` ranks on `nodes` emulated hosts (launch/shardrun
// --nodes) with each host's link capped at every rate of `gbit` (0: uncapped), for FSDP over all
// ranks, HSDP (one shard group per host; replica_sync each and last) and DDP, with the same
// global batch (ranks x micro_batches sequences, unless an override says otherwise) in
// `micro_batches` micro-batches: tokens/s, exposed communication, the bytes that
// crossed the links per step beside the start-up summary's prediction, and peak RSS per rank.
#include <string>
#include <vector>

namespace st {

struct MeshBenchOptions {
  std::string config = "small";
  std::vector<double> gbit = {1, 2, 5, 0};
  int ranks = 4;
  int nodes = 2;
  int micro_batches = 4;
  int steps = 3;
  int warmup = 1;
  bool json = false;
  std::vector<std::string> overrides;
};

int run_bench_mesh(const MeshBenchOptions& options);

}  // namespace st
