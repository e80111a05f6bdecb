#pragma once
// shardtrain simulate --plan: the fastest layouts of a config that fit a cluster at one rank
// count. It enumerates the layouts (TP, PP, data-parallel split, schedule and virtual stages,
// micro-batches, activation checkpointing, hpZ, quantized collectives), drops those that do not
// fit the cluster's memory per rank (naming the largest term) or that the runtime would refuse,
// bounds each of the rest from below without the network (plan_lower_bound), and simulates them
// in the order of their bounds until the next bound is slower than the best few simulated.
#include <string>
#include <vector>

#include "launch/simulate_command.hpp"

namespace st {

// One layout the planner tries: what it sets in the config.
struct PlanLayout {
  MeshShape mesh;
  PipeSchedule schedule = PipeSchedule::one_f_one_b;
  int virtual_stages = 1;
  int micro_batches = 1;
  ActivationCheckpointing checkpointing = ActivationCheckpointing::none;
  int reshard_to = 0;
  // Quantized collectives across nodes: reductions, and gathers when the shard group crosses
  // nodes (the runtime refuses them otherwise).
  Quantization quantization = Quantization::none;
  bool quantize_gathers = false;
  std::string data;  // "fsdp", "hsdp", "ddp"
  std::string label() const;
  // The config keys that make this layout (what `train` takes on its command line).
  std::vector<std::string> overrides() const;
  Config apply(const Config& base) const;
};

// The layouts of `config` on `ranks` ranks of nodes of `ranks_per_node`, before memory or the
// runtime's checks (plan_row) judge them; the pruning rules that need no simulation are applied
// here (docs/simulate.md lists them).
std::vector<PlanLayout> plan_layouts(const Config& config, int ranks, int ranks_per_node);

// A step time no simulation of `row` can beat: each pipeline rank's compute and its blocking TP
// collectives at the link's full rate (no latency), the schedule's makespan with every stage at
// the least loaded stage's cost and free transfers, then the largest optimizer step.
double plan_lower_bound(const PlannedRow& row);

int run_plan(const SimulateOptions& options, const Config& config, const LoadedCluster& cluster);

}  // namespace st
