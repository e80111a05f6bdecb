#include "launch/simulate_command.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <sys/stat.h>
#include <unistd.h>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <thread>
#include <type_traits>

#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "core/ops/matmul_path.hpp"
#include "core/staged_output.hpp"
#include "launch/cache_dir.hpp"
#include "launch/model_factory.hpp"
#include "launch/plot.hpp"
#include "launch/sharded_trainer.hpp"
#include "launch/simulate_calibration.hpp"
#include "launch/simulate_plan.hpp"
#include "parallel/fsdp/fsdp_runtime.hpp"
#include "parallel/mesh_layout.hpp"
#include "parallel/pipeline/pipeline_runtime.hpp"
#include "parallel/tp_gradient_sums.hpp"
#include "simulate/compute_model.hpp"

namespace st {

ProfiledModel profiled_model_of(const Config& config) {
  const ModelConfig& m = config.model;
  ProfiledModel p{m.n_layer,
                  m.n_embd,
                  m.n_head,
                  m.padded_vocab(),
                  config.training.seq_len,
                  activation_checkpointing_name(config.sharding.activation_checkpointing),
                  std::string(dtype_name(config.precision.param_dtype)),
                  m.family,
                  {}};
  const ModelFamily& family = model_family(m.family);
  for (const OwnKey& key : family.own_keys) p.own[key.key] = family.own_value(m, key.key);
  return p;
}

SimPlatform platform_for(const LoadedCluster& cluster, int ranks) {
  const ClusterSpec& c = cluster.spec;
  SimPlatform p;
  p.ranks_per_node = std::min(ranks, c.ranks_per_node);
  if (ranks % p.ranks_per_node != 0)
    fail_input("--ranks {}: not a whole number of the cluster's nodes of {} ranks", ranks,
               c.ranks_per_node);
  p.nodes = ranks / p.ranks_per_node;
  PlatformLinks& l = p.links;
  const CalibrationProfile* profile = cluster.profile.get();
  const double ranks_per_core = double(p.ranks_per_node) / c.cores();
  if (c.intra_from_profile) {
    const std::string who = c.name + "'s intra_node.link = \"shm\"";
    const LinkFit& ring = profile->link("ring-shm", who, ranks_per_core);
    const LinkFit& window = profile->link("shm", who, ranks_per_core);
    l.intra_gather = ring.all_gather;
    l.intra_reduce = ring.reduce_scatter;
    l.shm_window = true;
    l.shm_gather = window.all_gather;
    l.shm_reduce = window.reduce_scatter;
    l.intra_all_reduce = ring.all_reduce;
  } else {
    const double beta = c.intra.bandwidth > 0 ? 1.0 / c.intra.bandwidth : 0;
    l.intra_gather = l.intra_reduce = {c.intra.latency, beta};
  }
  if (p.nodes == 1) {
    // No byte crosses a node: the inter-node link is not asked for (a profile calibrated
    // without --tcp predicts one node).
    l.inter_gather = l.intra_gather;
    l.inter_reduce = l.intra_reduce;
    l.inter_all_reduce = l.intra_all_reduce;
  } else if (!c.inter_profile_link.empty()) {
    const LinkFit& fit =
        profile->link(c.inter_profile_link, c.name + "'s inter_node.link", ranks_per_core);
    l.inter_gather = fit.all_gather;
    l.inter_reduce = fit.reduce_scatter;
    l.inter_all_reduce = fit.all_reduce;
    // Uncapped and one rank per host, the stack itself is the limit: its β is CPU time per
    // byte, half at each end.
    if (c.cores_per_node > 0 && profile->links.count("tcp"))
      l.inter_cpu_per_byte = profile->link("tcp", c.name, 0.5).all_gather.beta / 2;
  } else {
    const double beta = c.inter.bandwidth > 0 ? 1.0 / c.inter.bandwidth : 0;
    // A message between nodes crosses both ranks' links inside their nodes too; with a NIC
    // per rank it goes NIC to NIC.
    l.inter_gather = c.nic_per_rank ? AlphaBeta{c.inter.latency, beta}
                                    : AlphaBeta{c.inter.latency + l.intra_gather.alpha,
                                                std::max(beta, l.intra_gather.beta)};
    l.inter_reduce = {
        l.inter_gather.alpha,
        l.inter_gather.beta + std::max(0.0, l.intra_reduce.beta - l.intra_gather.beta)};
  }
  l.fabric = c.fabric;
  l.oversubscription = c.oversubscription;
  l.nic_per_rank = c.nic_per_rank;
  if (c.cores_per_node > 0) {  // the machine's cores are shared by its ranks in the engine
    p.nodes_per_machine = std::min(c.nodes_per_machine, p.nodes);
    p.machine_cores = c.cores_per_node * p.nodes_per_machine;
  }
  return p;
}

std::string mesh_label(const MeshShape& mesh) {
  return fmt::format("{}x{}{}{}", mesh.dp_shard, mesh.dp_replicate,
                     mesh.tp > 1 ? fmt::format(" tp{}", mesh.tp) : "",
                     mesh.pp > 1 ? fmt::format(" pp{}", mesh.pp) : "");
}

namespace {

// What a pipelined step replays: the one schedule's shape and the stages (as the runtime splits
// the model), the boundary's bytes, the share of a block's (and the head's) backward its
// weight-gradient matmuls take (their FLOPs: 2 per weight and token, as the forward's; over
// the backward's), and each pipeline rank's optimizer time and TP gradient sums over the units
// it holds.
PipelinePlan pipeline_plan(const Config& config, const Model& model, const ModelWork& work,
                           const std::vector<UnitLayout>& units, MeshShape mesh, int64_t rows,
                           double optimizer_per_element) {
  const PipelineOptions options = pipeline_options(config);
  PipelinePlan p;
  p.ranks = mesh.pp;
  p.schedule = options.schedule;
  p.virtual_stages = options.virtual_stages;
  p.stages = pipeline_split(model, mesh.pp, options, config.training.seq_len);
  const double tokens = double(rows * config.training.seq_len);
  p.boundary_bytes = double(model.stage_boundary_numel(rows, config.training.seq_len)) *
                     double(dtype_size(options.wire_dtype));
  const auto share = [](double part, double whole) {
    return whole > 0 ? std::clamp(part / whole, 0.0, 1.0) : 0.0;
  };
  p.weight_share = share(2 * double(units.at(1).padded_numel) * tokens, work.block_backward.flops);
  const double head_numel =
      double(config.model.padded_vocab()) / mesh.tp * double(config.model.n_embd);
  p.head_weight_share = share(2 * head_numel * tokens, work.root_backward_pre.flops);
  for (int r = 0; r < mesh.pp; ++r) {
    const std::vector<int> held = pipeline_held_units(model, p.stages, mesh.pp, r);
    double shard = 0;
    for (int u : held) shard += double(units.at(size_t(u)).shard_numel);
    p.optimizer.push_back(optimizer_per_element * shard);
    p.tp_shared_grad_bytes.push_back(
        mesh.tp > 1 ? TpGradientSums::predicted_bytes(model.param_specs(), model.tp_partial_grads(),
                                                      mesh.dp_shard, &held)
                    : 0);
  }
  return p;
}

// As the runtime refuses it (ShardedTrainer): a TP group across the cluster's nodes.
void check_tp_within_nodes(const Config& config, MeshShape mesh, int ranks_per_node) {
  if (mesh.tp > 1 && ranks_per_node % mesh.tp != 0 && !config.parallel.allow_cross_node_tp)
    fail_input(
        "parallel.tp = {} puts TP groups across the cluster's nodes of {} ranks: every block's "
        "activations would cross the slow link four times a micro-batch. Make tp divide the "
        "ranks per node, or set parallel.allow_cross_node_tp = true",
        mesh.tp, ranks_per_node);
}

// What the replay runs: the units' sizes, the sharding settings, and the measured or modelled
// compute time of each part of a micro-batch.
StepPlan step_plan(const Config& config, MeshShape mesh, const std::vector<UnitLayout>& units,
                   const ComputeTimes& times, int threads, int ranks_per_node,
                   const ModelWork& work, const Model& model) {
  const auto& t = config.training;
  StepPlan plan;
  int64_t shard_elements = 0;
  for (const UnitLayout& u : units) {
    plan.units.push_back({u.padded_numel, u.shard_numel});
    shard_elements += u.shard_numel;
  }
  plan.param_bytes = int(dtype_size(config.precision.param_dtype));
  plan.reshard_after_forward = config.sharding.reshard_after_forward;
  plan.reshard_to = int(config.sharding.reshard_to);
  if (plan.reshard_to) check_reshard_to(plan.reshard_to, mesh.dp_shard);  // this row's mesh
  plan.prefetch = int(config.sharding.prefetch);
  plan.accumulation = config.sharding.accumulation;
  plan.replica_sync = config.sharding.replica_sync;
  plan.replicated = mesh.dp_replicate > 1;
  plan.replicas = mesh.dp_replicate;
  plan.replicas_in_place = config.sharding.symmetric_memory;
  // Quantized collectives as the runtime would plan them on these nodes (refused by name where
  // they cannot apply), from the first shard group and the first replica group.
  std::vector<int> shard_nodes, replica_nodes;
  for (int r : group_members(mesh, 0, {MeshDim::dp_shard}))
    shard_nodes.push_back(block_of(r, ranks_per_node));
  if (mesh.dp_replicate > 1)
    for (int r : group_members(mesh, 0, {MeshDim::dp_replicate}))
      replica_nodes.push_back(block_of(r, ranks_per_node));
  plan.gather_quantization = config.sharding.gather_quantization;
  plan.reduce_quantization = config.sharding.reduce_quantization;
  plan.quantized = plan_quantization(plan.gather_quantization, plan.reduce_quantization,
                                     shard_nodes, replica_nodes);
  plan.codec_seconds_per_value = times.codec_per_value;
  plan.micro_batches = int(t.micro_batches);
  if (mesh.pp > 1) {
    plan.pipeline = pipeline_plan(config, model, work, units, mesh,
                                  rows_per_data_rank(config, mesh), times.optimizer_per_element);
    plan.accumulation = Accumulation::reduce_last;  // each held unit reduced once a step
  }
  plan.tp = mesh.tp;
  plan.tp_calls = {work.root_forward_pre.tp,   work.root_forward_post.tp, work.root_backward_pre.tp,
                   work.root_backward_post.tp, work.block_forward.tp,     work.block_backward.tp};
  plan.tp_shared_grad_bytes =
      TpGradientSums::predicted_bytes(model.param_specs(), model.tp_partial_grads(), mesh.dp_shard);
  plan.threads = threads;
  plan.compute = times;
  plan.optimizer = times.optimizer_per_element * double(shard_elements);
  plan.step_overhead = times.step_overhead;
  return plan;
}

}  // namespace

PlannedRow plan_row(const Config& config_in, const LoadedCluster& cluster, int ranks,
                    const std::string& mesh_name, MeshShape mesh) {
  Config config = config_in;
  config.parallel.dp_shard = mesh.dp_shard;
  config.parallel.dp_replicate = mesh.dp_replicate;
  config.parallel.tp = mesh.tp;
  config.parallel.pp = mesh.pp;
  validate_for_world(config, ranks);  // the batch must split over the ranks, as train requires
  PlannedRow row;
  row.platform = platform_for(cluster, ranks);
  ClusterSpec spec = cluster.spec;
  spec.ranks_per_node = row.platform.ranks_per_node;
  // training.threads as the runtime reads it: given, or the node's cores over its ranks.
  if (config.training.threads > 0)
    spec.threads_per_rank = int(config.training.threads);
  else if (spec.cores_per_node > 0)
    spec.threads_per_rank = std::max(1, spec.cores_per_node / spec.ranks_per_node);

  check_tp_within_nodes(config, mesh, row.platform.ranks_per_node);
  // TP rank 0's slices (every TP rank's are the same sizes, shared KV heads aside: the same too).
  const std::unique_ptr<Model> model = make_model(config, tp_slice_of(config, 0, ranks));
  const std::vector<UnitLayout> units =
      layout_units(model->param_specs(), model->num_units(), mesh.dp_shard);
  const auto& t = config.training;
  ComputeShape shape;
  shape.model = profiled_model_of(config);
  shape.rows = rows_per_data_rank(config, mesh);
  shape.threads = spec.threads_per_rank;
  shape.tp = mesh.tp;
  shape.work = model->work(shape.rows, t.seq_len);  // the model's own FLOPs, bytes, TP collectives
  const ComputeTimes times = compute_times(shape, spec, cluster.profile.get());
  row.plan = step_plan(config, mesh, units, times, spec.threads_per_rank,
                       row.platform.ranks_per_node, *shape.work, *model);

  Prediction& p = row.p;
  p.ranks = ranks;
  p.mesh_name = mesh_name;
  p.mesh = mesh;
  p.compute_source = times.source;
  const int states = states_per_element(config.optimizer.kind);
  std::vector<MemoryBudget> stages;
  p.memory = config_memory_budget(config, *model, units, states, ranks, &stages);
  for (const MemoryBudget& b : stages) p.stage_memory.push_back(double(b.total()));
  if (mesh.pp > 1)
    p.pipeline =
        PipelineSchedule(config.parallel.pp_schedule,
                         {mesh.pp, int(config.parallel.pp_virtual_stages), int(t.micro_batches)})
            .describe();
  p.memory_bytes = double(p.memory.total());
  // The activations under each checkpointing mode, from this model switched in turn.
  for (const ActivationCheckpointing mode :
       {ActivationCheckpointing::none, ActivationCheckpointing::selective,
        ActivationCheckpointing::full}) {
    model->set_activation_checkpointing(mode);
    p.activations_by_mode[int(mode)] = double(model->activation_bytes(shape.rows, t.seq_len));
  }
  model->set_activation_checkpointing(config.sharding.activation_checkpointing);
  p.fits = !(spec.memory_per_node > 0) ||
           p.memory_bytes * row.platform.ranks_per_node <= spec.memory_per_node;
  row.tokens = double(t.global_batch * t.seq_len);
  row.flops_per_token = model->flops_per_token();
  row.peak = spec.matmul_flops;
  if (cluster.profile && !cluster.profile->matmul_peak.empty()) {
    const auto& peaks = cluster.profile->matmul_peak;
    auto it = peaks.find(spec.threads_per_rank);
    row.peak = it != peaks.end()
                   ? it->second
                   : peaks.rbegin()->second * spec.threads_per_rank / peaks.rbegin()->first;
    row.peak /= std::max(1.0, spec.ranks_per_core() * spec.threads_per_rank);  // cores shared
  }
  return row;
}

Prediction finish_row(const PlannedRow& row, const SimResult& sim) {
  Prediction p = row.p;
  p.sim = sim;
  p.tokens_per_s = row.tokens / sim.step;
  if (row.peak > 0) p.mfu = row.flops_per_token * p.tokens_per_s / (double(p.ranks) * row.peak);
  return p;
}

Prediction predict(const Config& config, const LoadedCluster& cluster, int ranks,
                   const std::string& mesh_name, MeshShape mesh, const SimOptions& options) {
  const PlannedRow row = plan_row(config, cluster, ranks, mesh_name, mesh);
  return finish_row(row, simulate_step(row.platform, mesh, row.plan, options));
}

std::vector<std::pair<std::string, MeshShape>> meshes_for(const Config& config,
                                                          const std::vector<std::string>& names,
                                                          int ranks, int ranks_per_node) {
  // The named meshes keep the config's parallel.tp (TP groups inside a node) and parallel.pp
  // (its stages) and split the other ranks their way.
  const int tp = config.parallel.tp > 1 ? int(config.parallel.tp) : 1;
  const int pp = config.parallel.pp > 1 ? int(config.parallel.pp) : 1;
  std::vector<std::pair<std::string, MeshShape>> out;
  const std::vector<std::string> wanted =
      names.empty() ? std::vector<std::string>{"fsdp", "hsdp", "ddp"} : names;
  if (ranks % (tp * pp) != 0 &&
      std::any_of(wanted.begin(), wanted.end(), [](auto& n) { return n != "config"; }))
    fail_input("--ranks {}: parallel.tp = {} x parallel.pp = {} does not divide it", ranks, tp, pp);
  const int dp = ranks / (tp * pp);
  for (const std::string& name : wanted) {
    if (name == "fsdp") {
      out.push_back({name, {.dp_shard = dp, .tp = tp, .pp = pp}});
    } else if (name == "hsdp") {
      const int shard = std::max(1, std::min(ranks / pp, ranks_per_node) / tp);
      if (shard < dp && dp % shard == 0)
        out.push_back({name, {.dp_shard = shard, .dp_replicate = dp / shard, .tp = tp, .pp = pp}});
    } else if (name == "ddp") {
      if (dp > 1) out.push_back({name, {.dp_replicate = dp, .tp = tp, .pp = pp}});
    } else if (name == "config") {
      out.push_back({name, mesh_shape(config, ranks)});
    } else {
      fail_input("--mesh: '{}' is not fsdp, hsdp, ddp or config", name);
    }
  }
  return out;
}

namespace {

void print_table(const std::vector<Prediction>& rows, const Config& config,
                 const LoadedCluster& c) {
  fmt::print("config: {} L={} C={} T={}, global batch {} x {} micro-batch(es); cluster '{}'\n",
             model_family(config.model.family).display_name, config.model.n_layer,
             config.model.n_embd, config.training.seq_len, config.training.global_batch,
             config.training.micro_batches, c.spec.name);
  if (!rows.empty()) fmt::print("compute: {}\n", rows.front().compute_source);
  fmt::print("{:>6} {:<10} {:>10} {:>10} {:>9} {:>6} {:>9} {:>9} {:>9} {:>11} {:>6} {:>7}  {}\n",
             "ranks", "mesh", "step_ms", "compute", "exposed", "exp%", "intra_MB", "inter_MB",
             "mem_GiB", "tokens/s", "MFU", "sim_s", "waits longest on");
  for (const Prediction& p : rows) {
    const SimResult& s = p.sim;
    fmt::print(
        "{:>6} {:<10} {:>10.2f} {:>10.2f} {:>9.2f} {:>5.1f}% {:>9.1f} {:>9.1f} {:>8.2f}{} "
        "{:>11.0f} {:>5.1f}% {:>7.2f}  {}\n",
        p.ranks,
        fmt::format("{}{}", p.mesh_name == "config" ? "" : p.mesh_name + " ", mesh_label(p.mesh)),
        s.step * 1e3, s.compute * 1e3, s.exposed * 1e3, 100 * s.exposed / s.step,
        s.intra_bytes / 1e6, s.inter_bytes / 1e6, p.memory_bytes / 1073741824.0, p.fits ? " " : "!",
        p.tokens_per_s, 100 * p.mfu, s.wall_seconds, s.longest_wait.empty() ? "-" : s.longest_wait);
  }
  // Why a row's memory is what it is: the budget's terms, and the activations under each
  // activation-checkpointing mode (the config's is the one in the sum).
  const double gib = 1073741824.0;
  fmt::print(
      "memory per rank, GiB = shards (FP32 master + gradient) + optimizer + unsharded "
      "parameters (and hpZ's kept slices) + unsharded gradients (and quantized collectives' "
      "buffers) + activations [none / selective "
      "/ full] + workspace\n");
  for (const Prediction& p : rows) {
    const MemoryBudget& m = p.memory;
    fmt::print(
        "{:>6} {:<10} {:>8.2f} = {:.2f} + {:.2f} + {:.2f} + {:.2f} + {:.2f} [{:.2f} / {:.2f} / "
        "{:.2f}] + {:.2f}\n",
        p.ranks, fmt::format("{} {}", p.mesh_name, mesh_label(p.mesh)), p.memory_bytes / gib,
        m.master_and_grad / gib, m.optimizer_state / gib,
        (m.unsharded_params + m.kept_slices) / gib, (m.unsharded_grads + m.quantized_buffers) / gib,
        m.activations / gib, p.activations_by_mode[0] / gib, p.activations_by_mode[1] / gib,
        p.activations_by_mode[2] / gib, double(m.matmul_workspace + m.checkpoint_staging) / gib);
  }
  for (const Prediction& p : rows) {
    if (p.mesh.pp < 2) continue;
    const std::string who = fmt::format("{} {}", p.mesh_name, mesh_label(p.mesh));
    fmt::print("{:>6} {:<10} pipeline: {}; simulated {:.1f}%, {:.2f} MB between stages\n", p.ranks,
               who, p.pipeline, 100 * p.sim.pp_bubble, p.sim.pp_bytes / 1e6);
    std::vector<std::string> stages;
    for (size_t r = 0; r < p.stage_memory.size(); ++r)
      stages.push_back(fmt::format("rank {} {:.2f}", r, p.stage_memory[r] / gib));
    fmt::print("{:>6} {:<10} memory per pipeline rank, GiB: {}\n", p.ranks, who,
               fmt::join(stages, ", "));
  }
  for (const Prediction& p : rows)
    if (p.mesh.tp > 1)
      fmt::print("{:>6} {:<10} TP collectives {:.2f} ms of the step (each blocks the compute)\n",
                 p.ranks, fmt::format("{} {}", p.mesh_name, mesh_label(p.mesh)),
                 p.sim.tp_exposed * 1e3);
  if (std::any_of(rows.begin(), rows.end(),
                  [](const Prediction& p) { return p.sim.simulated_ranks < p.ranks; }))
    fmt::print(
        "sim_s: nodes that behave alike simulated once (the first nodes of each row or stage; "
        "--all-nodes "
        "simulates every one)\n");
  if (std::any_of(rows.begin(), rows.end(), [](const Prediction& p) { return !p.fits; }))
    fmt::print(
        "!: the runtime's memory budget times the ranks per node exceeds the node's memory\n");
}

nlohmann::json memory_terms_json(const Prediction& p) {
  const double mib = 1048576.0;
  const MemoryBudget& m = p.memory;
  return {{"shards", m.master_and_grad / mib},
          {"optimizer", m.optimizer_state / mib},
          {"unsharded_params", m.unsharded_params / mib},
          {"kept_slices", m.kept_slices / mib},
          {"quantized_buffers", m.quantized_buffers / mib},
          {"unsharded_grads", m.unsharded_grads / mib},
          {"activations", m.activations / mib},
          {"activations_none", p.activations_by_mode[0] / mib},
          {"activations_selective", p.activations_by_mode[1] / mib},
          {"activations_full", p.activations_by_mode[2] / mib},
          {"workspace", double(m.matmul_workspace + m.checkpoint_staging) / mib}};
}

nlohmann::json stage_mib(const Prediction& p) {
  nlohmann::json out = nlohmann::json::array();
  for (double b : p.stage_memory) out.push_back(b / 1048576.0);
  return out;
}

void plot(const std::vector<Prediction>& rows, const std::string& out) {
  std::map<std::string, PlotSeries> tokens, exposed;
  for (const Prediction& p : rows) {
    tokens[p.mesh_name].title = p.mesh_name;
    exposed[p.mesh_name].title = p.mesh_name;
    tokens[p.mesh_name].points.push_back({double(p.ranks), p.tokens_per_s});
    exposed[p.mesh_name].points.push_back({double(p.ranks), 100 * p.sim.exposed / p.sim.step});
  }
  PlotPanel a{"predicted throughput", "tokens/s", {}}, b{"exposed communication", "% of step", {}};
  for (auto& [_, s] : tokens) a.series.push_back(s);
  for (auto& [_, s] : exposed) b.series.push_back(s);
  render_plot({a, b}, "ranks", out);
}

// Where `simulate calibrate` output for this machine, precision path and model family is cached:
// the bundled `this-machine` cluster looks there (its own profile is from another machine).
std::string cached_profile_path(const std::string& cluster, const std::string& matmul,
                                const std::string& family) {
  const std::string dir = shardtrain_cache_dir();
  std::string key =
      fmt::format("{}-{}c-{}-{}", cpu_features().brand, std::thread::hardware_concurrency(),
                  cpu_features().summary(), matmul);
  for (char& c : key)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '-';
  // GPT-2's calibration keeps the name it had before profiles recorded their family.
  return fmt::format("{}/{}.{}{}.profile.json", dir, cluster, key,
                     family == "gpt2" ? "" : "." + family);
}

// Empty when `p` was measured on a machine like this one with the same matmul path, else why not.
std::string profile_mismatch(const CalibrationProfile& p, const std::string& matmul) {
  const CpuFeatures& here = cpu_features();
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::string> differ;
  auto shown = [](const std::string& v) { return v.empty() ? std::string("not recorded") : v; };
  if (p.cpu != here.brand)
    differ.push_back(fmt::format("cpu '{}' vs '{}'", shown(p.cpu), here.brand));
  if (p.cpu_features != here.summary())
    differ.push_back(
        fmt::format("cpu_features '{}' vs '{}'", shown(p.cpu_features), here.summary()));
  if (p.cores != cores) differ.push_back(fmt::format("cores {} vs {}", p.cores, cores));
  if (p.matmul != matmul)
    differ.push_back(fmt::format("matmul '{}' vs '{}'", shown(p.matmul), matmul));
  return fmt::format("{}", fmt::join(differ, ", "));
}

// The profile a prediction uses: one measured on this machine and matmul path (a profile from
// an AVX512-BF16 CPU predicted 4.7x the throughput of an AVX2 one), of the config's own family
// when there is one (its rates measured on that family's code), else of another (its rates
// scaled to this family's FLOPs and bytes). The bundled `this-machine` also looks in its cache
// of this machine's calibrations (one per family). False when none was measured here.
bool use_profile_measured_here(LoadedCluster& cluster, const Config& config) {
  if (!cluster.profile) return true;
  const std::string matmul = matmul_identity(config.precision.param_dtype);
  const std::string& family = config.model.family;
  std::vector<std::pair<std::string, std::shared_ptr<CalibrationProfile>>> candidates;
  auto add_cached = [&](const std::string& of) {
    const std::string cached = cached_profile_path(cluster.spec.name, matmul, of);
    std::error_code ec;
    if (cluster.bundled && std::filesystem::is_regular_file(cached, ec))
      candidates.push_back({cached, std::make_shared<CalibrationProfile>(read_profile(cached))});
  };
  for (const bool same : {true, false}) {
    for (const auto& named : cluster.profiles)
      if ((named.second->model.family == family) == same) candidates.push_back(named);
    add_cached(same ? family : "gpt2");
  }
  for (const auto& [where, profile] : candidates)
    if (profile_mismatch(*profile, matmul).empty()) {
      cluster.profile = profile;
      cluster.profile_source = where;
      return true;
    }
  return false;
}

// The overrides that give a calibration run `config`'s matmul path: the parameter dtype and the
// keys that choose the matmuls, where they differ from the defaults.
std::vector<std::string> matmul_overrides(const Config& config) {
  std::vector<std::string> out;
  const std::remove_cvref_t<decltype(config.precision)> defaults{};
  if (config.precision.param_dtype != defaults.param_dtype)
    out.push_back(
        fmt::format("precision.param_dtype={}", dtype_name(config.precision.param_dtype)));
  if (config.precision.bf16_matmul != defaults.bf16_matmul)
    out.push_back(fmt::format("precision.bf16_matmul={}",
                              bf16_matmul_path_name(config.precision.bf16_matmul)));
  if (config.precision.fp32_matmul != defaults.fp32_matmul)
    out.push_back(fmt::format("precision.fp32_matmul={}",
                              fp32_matmul_engine_name(config.precision.fp32_matmul)));
  return out;
}

// No profile measured here. The bundled this-machine calibrates this machine once, into its
// cache, where every later run finds it; another cluster (or no calibrator) names the command.
void calibrate_or_refuse(LoadedCluster& cluster, const SimulateOptions& o, const Config& config) {
  const std::string matmul = matmul_identity(config.precision.param_dtype);
  const std::string cached = cached_profile_path(cluster.spec.name, matmul, "gpt2");
  const std::vector<std::string> overrides = matmul_overrides(config);
  const std::string mismatch = profile_mismatch(*cluster.profile, matmul);
  if (cluster.bundled && o.calibrate_here) {
    const std::filesystem::path dir = std::filesystem::path(cached).parent_path();
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec || access(dir.c_str(), W_OK) != 0)
      fail_input(
          "--cluster {}: no calibration of this machine yet, and its cache folder '{}' cannot be "
          "written ({}); set XDG_CACHE_HOME (or HOME) to a writable folder",
          o.cluster, dir.string(), ec ? ec.message() : std::strerror(errno));
    fmt::print(stderr,
               "simulate: no calibration of this machine for --cluster {} yet ({}; bundled vs "
               "here): measuring it once (a minute or two; the next runs read it) into {}\n",
               o.cluster, mismatch, cached);
    o.calibrate_here(overrides, cached);
    if (use_profile_measured_here(cluster, config)) return;
    fail("--cluster {}: the calibration just written to {} does not match this machine ({})",
         o.cluster, cached, profile_mismatch(read_profile(cached), matmul));
  }
  fail_input(
      "--cluster {}: {} was measured on another machine or matmul path ({}; profile vs here), so "
      "its compute times do not hold here. Calibrate this machine (a few minutes): shardtrain "
      "simulate calibrate --config tiny --tcp{} --out {}{}",
      o.cluster, cluster.profile_source, mismatch,
      overrides.empty() ? "" : " " + fmt::format("{}", fmt::join(overrides, " ")),
      cluster.bundled ? cached : "MY.profile.json",
      cluster.bundled ? " (then --cluster " + o.cluster + " uses it)"
                      : ", and point the cluster's compute.profile at it");
}

constexpr double kGiB = 1073741824.0;
constexpr double kMaxMemoryGib = 1 << 20;  // a PiB: any machine's

// Half of this machine's available memory (MemAvailable), or 4 GiB where it cannot be read.
double default_memory_limit() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, line;
  double kib = 0;
  while (meminfo >> key >> kib) {
    if (key == "MemAvailable:") return kib * 1024 / 2;
    std::getline(meminfo, line);
  }
  return 4 * kGiB;
}

}  // namespace

double engine_memory_limit(double max_gib) {
  return max_gib > 0 ? max_gib * kGiB : default_memory_limit();
}

void check_engine_memory(const std::vector<PlannedRow>& rows, const SimOptions& options,
                         double max_gib) {
  const double limit = engine_memory_limit(max_gib);
  const PlannedRow* largest = nullptr;
  EngineFootprint most;
  int over = 0;
  for (const PlannedRow& row : rows) {
    const EngineFootprint f = engine_footprint(row.platform, row.p.mesh, row.plan, options);
    over += f.bytes > limit;
    if (!largest || f.bytes > most.bytes) largest = &row, most = f;
  }
  if (over == 0) return;
  const Prediction& p = largest->p;
  const bool folded = most.simulated_ranks < p.ranks;
  constexpr int kFewest = 4;  // nodes simulated at least (represented_nodes)
  fail_input(
      "simulate: {} ranks as {} {} would take an estimated {:.2f} GiB in the engine ({} ranks "
      "simulated, {:.0f} actors{}), over the limit of {:.2f} GiB ({}){}; {}, or raise "
      "--max-memory GIB on a machine with the memory",
      p.ranks, p.mesh_name, mesh_label(p.mesh), most.bytes / kGiB, most.simulated_ranks,
      most.actors,
      options.every_node                  ? ": --all-nodes"
      : folded                            ? ": nodes that behave alike once"
      : largest->platform.nodes > kFewest ? ": every node, as this mesh's nodes do not behave alike"
                                          : "",
      limit / kGiB,
      max_gib > 0 ? "--max-memory" : "half of the available memory, the default of --max-memory",
      over > 1 ? fmt::format("; {} of the {} rows are over it", over, rows.size()) : "",
      options.every_node ? "drop --all-nodes or simulate fewer ranks"
                         : "simulate fewer ranks or another mesh");
}

namespace {

// --plot's file, checked before any simulation: its extension, gnuplot, a place to write it.
void check_plot_destination(const std::string& plot) {
  const std::string ext = std::filesystem::path(plot).extension().string();
  if (ext != ".png" && ext != ".svg")
    fail_input("--plot '{}' must be a file name ending in .png or .svg", plot);
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0)
    fail_input("--plot '{}': gnuplot is not installed (apt-get install gnuplot-nox)", plot);
  struct stat st {};
  if (::stat(plot.c_str(), &st) == 0 && S_ISFIFO(st.st_mode)) return;  // opened once, to write
  StagedOutput(plot, "--plot").check_writable();
}

// The flags' values, before any work: each out of its range is exit 2 naming the flag.
void check_simulate_flags(const SimulateOptions& o) {
  for (int n : o.ranks)
    if (n < 1 || n > kMaxSimulatedRanks)
      fail_input("--ranks: {} must be in [1, {}]", n, kMaxSimulatedRanks);
  if (o.max_ring_steps < 0)
    fail_input(
        "--max-ring-steps {} must be in [0, {}] (0: simulate every step of every ring; else the "
        "steps simulated message by message before the rest are extrapolated)",
        o.max_ring_steps, std::numeric_limits<int>::max());
  if (!(o.max_memory_gib >= 0 && o.max_memory_gib <= kMaxMemoryGib))
    fail_input("--max-memory {} must be in [0, {}] GiB (0: half of the available memory)",
               o.max_memory_gib, kMaxMemoryGib);
  if (!o.plot.empty()) check_plot_destination(o.plot);
}

}  // namespace

int run_simulate(const SimulateOptions& o) {
  check_simulate_flags(o);
  const Config config = load_config(o.common.config, o.common.overrides);
  if (o.cluster.empty())
    fail_input("simulate: --cluster FILE.toml (or a bundled cluster name) is required");
  LoadedCluster cluster = load_cluster(o.cluster);
  apply_matmul_settings(config);
  if (!use_profile_measured_here(cluster, config)) calibrate_or_refuse(cluster, o, config);
  if (cluster.spec.has_calibration) fit_calibration(cluster, o.max_ring_steps);
  if (o.plan) return run_plan(o, config, cluster);
  std::vector<int> ranks = o.ranks;
  if (ranks.empty()) ranks = {cluster.spec.world()};
  SimOptions options;
  options.max_ring_steps = o.max_ring_steps;
  options.every_node = o.every_node;
  // Rows a mesh cannot run at a rank count (FSDP cannot split a unit that finely) are named
  // with the reason; the rows that can run are still predicted. Nothing runnable: exit 2.
  std::vector<PlannedRow> planned;
  std::vector<std::string> skipped;
  for (int n : ranks) {
    for (const auto& [name, mesh] : meshes_for(config, o.meshes, n, cluster.spec.ranks_per_node)) {
      try {
        planned.push_back(plan_row(config, cluster, n, name, mesh));
      } catch (const InputError& e) {
        skipped.push_back(fmt::format("{} ranks, {} {}: {}", n, name, mesh_label(mesh), e.what()));
      }
    }
  }
  check_engine_memory(planned, options, o.max_memory_gib);
  std::vector<Prediction> rows;
  for (const PlannedRow& row : planned)
    rows.push_back(finish_row(row, simulate_step(row.platform, row.p.mesh, row.plan, options)));
  if (rows.empty() && !skipped.empty())
    fail_input("simulate: no mesh can run: {}", fmt::join(skipped, "; "));
  if (o.common.json) {
    for (const Prediction& p : rows) {
      const SimResult& s = p.sim;
      fmt::print(
          "{}\n",
          nlohmann::json{
              {"cluster", cluster.spec.name},
              {"ranks", p.ranks},
              {"mesh", p.mesh_name},
              {"shard_degree", p.mesh.dp_shard},
              {"replicate_degree", p.mesh.dp_replicate},
              {"tp_degree", p.mesh.tp},
              {"pp_degree", p.mesh.pp},
              {"pp_schedule", p.mesh.pp > 1 ? pipe_schedule_name(config.parallel.pp_schedule) : ""},
              {"pp_virtual_stages", config.parallel.pp_virtual_stages},
              {"pp_bubble", s.pp_bubble},
              {"pp_bytes", s.pp_bytes},
              {"stage_memory_mib", stage_mib(p)},
              {"exposed_tp_ms", s.tp_exposed * 1e3},
              {"step_ms", s.step * 1e3},
              {"compute_ms", s.compute * 1e3},
              {"exposed_comm_ms", s.exposed * 1e3},
              {"exposed_share", s.exposed / s.step},
              {"exposed_comm_mean_ms", s.exposed_mean * 1e3},
              {"exposed_comm_max_ms", s.exposed_max * 1e3},
              {"longest_wait", s.longest_wait},
              {"intra_node_bytes", s.intra_bytes},
              {"inter_node_bytes", s.inter_bytes},
              {"memory_mib", p.memory_bytes / 1048576.0},
              {"memory_terms_mib", memory_terms_json(p)},
              {"fits", p.fits},
              {"tokens_per_s", p.tokens_per_s},
              {"mfu", p.mfu},
              {"messages", s.messages},
              {"simulated_ranks", s.simulated_ranks},
              {"simulation_s", s.wall_seconds},
              {"compute_source", p.compute_source}}
              .dump());
    }
  } else {
    print_table(rows, config, cluster);
  }
  for (const std::string& line : skipped)
    fmt::print(o.common.json ? stderr : stdout, "not simulated: {}\n", line);
  if (!o.plot.empty()) plot(rows, o.plot);
  return 0;
}

}  // namespace st
