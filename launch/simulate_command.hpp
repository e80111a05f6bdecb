#pragma once
// shardtrain simulate --config C [overrides] --cluster FILE.toml [--ranks 8,64] [--mesh ...]
// [--json] [--plot OUT] [--max-memory GIB]: the predicted step time, exposed communication, bytes
// per link class, memory, tokens/s and MFU of a config on a cluster, per rank count and mesh.
#include <functional>
#include <string>
#include <vector>

#include "launch/cluster_config.hpp"
#include "launch/commands.hpp"
#include "launch/config.hpp"
#include "parallel/fsdp/memory_budget.hpp"
#include "simulate/engine.hpp"

namespace st {

struct SimulateOptions {
  CommonOptions common;
  std::string cluster;
  std::vector<int> ranks;           // empty: the cluster's nodes x ranks_per_node
  std::vector<std::string> meshes;  // fsdp, hsdp, ddp, config; empty: all but config
  std::string plot;
  int max_ring_steps = SimOptions{}.max_ring_steps;
  bool every_node = false;
  // The most memory one simulation may take (GiB): a larger estimate (engine_footprint) is
  // refused before any runs. 0: half of this machine's available memory.
  double max_memory_gib = 0;
  // --plan: the fastest layouts that fit (simulate_plan.hpp), the best `top` of them printed
  // (0: every one that fits, none bounded out).
  bool plan = false;
  int top = 5;
  // Calibrates this machine (`simulate calibrate --config tiny OVERRIDES --out OUT`) when the
  // bundled this-machine cluster has no calibration of it yet; app/ wires it to bench/'s
  // calibrate, which launch/ does not include. Empty: say which command makes it instead.
  std::function<void(const std::vector<std::string>& overrides, const std::string& out)>
      calibrate_here;
};
int run_simulate(const SimulateOptions& options);

// One prediction: `config` on `ranks` ranks of `cluster` with `mesh`.
struct Prediction {
  int ranks = 0;
  std::string mesh_name;
  MeshShape mesh;
  SimResult sim;
  double memory_bytes = 0;                    // per rank, the runtime's budget
  MemoryBudget memory;                        // its terms (the most loaded pipeline rank's)
  std::vector<double> stage_memory;           // with pipeline stages: each pipeline rank's
  std::string pipeline;                       // with pipeline stages: the schedule, described
  double activations_by_mode[3] = {0, 0, 0};  // one micro-batch's, for none, selective, full
  bool fits = true;
  double tokens_per_s = 0, mfu = 0;
  std::string compute_source;
};
// One row before the engine runs: the prediction but its simulated step, and what the engine
// is given.
struct PlannedRow {
  Prediction p;  // all but sim, tokens_per_s and mfu
  SimPlatform platform;
  StepPlan plan;
  double tokens = 0;           // per step
  double flops_per_token = 0;  // the model's
  double peak = 0;             // one rank's matmul FLOP/s; 0: unknown
};
// `config` with `mesh` on `ranks` ranks of `cluster`, planned: an InputError names what cannot
// run (the batch does not split, a TP group across nodes, FSDP cannot split a unit so finely).
PlannedRow plan_row(const Config& config, const LoadedCluster& cluster, int ranks,
                    const std::string& mesh_name, MeshShape mesh);
// The prediction of a planned row, once the engine has simulated its step.
Prediction finish_row(const PlannedRow& row, const SimResult& sim);
// The most memory one simulation may take, bytes: `max_gib` (--max-memory), or 0 for half of
// the available memory.
double engine_memory_limit(double max_gib);
// Refuses the run, before any simulation, when the engine would need more memory for one of
// `rows` than `max_gib` (0: half of the available memory) allows: the largest row is named,
// with its estimate.
void check_engine_memory(const std::vector<PlannedRow>& rows, const SimOptions& options,
                         double max_gib);
// The meshes `names` ask for (fsdp, hsdp, ddp, config; empty: the first three) at `ranks`:
// each keeps the config's tp and pp and splits the rest its way.
std::vector<std::pair<std::string, MeshShape>> meshes_for(const Config& config,
                                                          const std::vector<std::string>& names,
                                                          int ranks, int ranks_per_node);
// "2x1" (dp_shard x dp_replicate), "1x1 tp2" with tensor parallelism, "2x1 pp2" with stages.
std::string mesh_label(const MeshShape& mesh);

Prediction predict(const Config& config, const LoadedCluster& cluster, int ranks,
                   const std::string& mesh_name, MeshShape mesh, const SimOptions& options);

// The model of `config` as a calibration profile records it: its family, shape, own keys in
// effect, activation checkpointing and parameter dtype.
ProfiledModel profiled_model_of(const Config& config);

// The simulated platform of `cluster` at `ranks` ranks (whole nodes, or one partial node).
SimPlatform platform_for(const LoadedCluster& cluster, int ranks);

}  // namespace st
