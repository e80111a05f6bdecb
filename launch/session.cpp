#include "launch/session.hpp"
#include "launch/pipeline_summary.hpp"

#include "collectives/agreement.hpp"
#include "collectives/startup_deadline.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <thread>

#include "core/bf16.hpp"
#include "core/cpu_features.hpp"
#include "core/memory_stats.hpp"
#include "core/model/block_model.hpp"
#include "core/ops/elementwise.hpp"
#include "core/ops/matmul.hpp"
#include "core/ops/matmul_path.hpp"
#include "launch/config_schema.hpp"
#include "launch/model_factory.hpp"
#include "launch/peak.hpp"
#include "launch/peak_cache.hpp"
#include "launch/training_cadence.hpp"

namespace st {

void Session::measure_peak(const Model* model) {
  const auto& t = config.training;
  const int64_t tokens = rows_per_data_rank(config, mesh_shape(config, ranks.size())) * t.seq_len;
  // A 1024 cube reaches the peak where a 2048 one spills the caches: measured on the 2-core AMD
  // EPYC (AVX2), 188 against 163 GFLOP/s, in 0.1 s of start-up instead of 0.7 s.
  std::vector<MatmulShape> shapes = {{1024, 1024, 1024}};
  const auto [m, k, n] = (model ? *model : trainer->model()).largest_matmul(tokens);
  // At most 16M elements per operand (64 MiB of FP32 output): rows beyond that change nothing
  // in the rate and could cost more memory than training itself.
  constexpr int64_t kMaxElements = int64_t(1) << 24;
  if (m > 0 && k > 0 && n > 0 && k <= kMaxElements && n <= kMaxElements)
    shapes.push_back({std::min(m, std::max<int64_t>(1, kMaxElements / std::max(k, n))), k, n});
  // Every rank measures at once, as they will compute during training, each trial timed from
  // a barrier to a barrier and counted at the slowest rank's time: the sum over ranks is the
  // machines' rate with all their cores busy, whatever the rank count (ranks timed alone, 4 on
  // 2 cores summed to about twice the machine).
  ProcessGroup& group = *ranks.group;
  Tensor slowest = Tensor::empty("peak_trial_seconds", {1}, DType::f64);
  const auto barrier = [&] { group.barrier()->wait(); };
  const PeakTrialSync together{barrier, barrier,
                               [&](double seconds) {
                                 slowest.data<double>()[0] = seconds;
                                 group.all_reduce(slowest, {.op = ReduceOp::max})->wait();
                                 return slowest.data<double>()[0];
                               },
                               group.size() > 1 ? 3 : 1};
  Tensor peak = Tensor::empty("peak_gflops", {1}, DType::f64);
  // The peak of the matmul that actually runs: FP32 where BF16 is widened to it.
  peak_dtype = compute_dtype_of_matmul(config.precision.param_dtype);
  // With several ranks, 2 trials of 3 matmuls: the barriers weigh little, and start-up runs
  // about the 5 single matmuls (and warm-up) that one rank times.
  const int trials = group.size() > 1 ? 2 : 5;
  peak.data<double>()[0] = measure_matmul_peak_gflops(peak_dtype, shapes, trials, together);
  if (test_peak_gflops > 0) peak.data<double>()[0] = test_peak_gflops / group.size();
  group.all_reduce(peak)->wait();
  peak_shapes.clear();
  for (const MatmulShape& s : shapes)
    peak_shapes += (peak_shapes.empty() ? "" : ", ") + s.describe();
  adopt_best_peak(peak.data<double>()[0], trials);
}

void Session::adopt_best_peak(double measured, int trials) {
  ProcessGroup& group = *ranks.group;
  peak_key = peak_cache_key(peak_dtype, group.size(), threads, ranks.ranks_on_node);
  // Rank 0's cache decides, so every rank divides by the same peak.
  Tensor cached = Tensor::empty("cached_peak_gflops", {1}, DType::f64);
  cached.data<double>()[0] = lead() ? best_known_peak(peak_key).value_or(0.0) : 0.0;
  group.all_reduce(cached, {.op = ReduceOp::max})->wait();
  const double best = cached.data<double>()[0];
  const std::string measured_now = fmt::format("best of {} at {}", trials, peak_shapes);
  if (best > measured && best > peak_gflops) {
    peak_gflops = best;
    peak_source = fmt::format("the best this machine has shown, from {}; measured now {:.0f}, {}",
                              peak_cache_path(), measured, measured_now);
    return;
  }
  if (measured <= peak_gflops) return;  // a benchmark's second measurement found no more
  peak_gflops = measured;
  peak_source = "measured now, " + measured_now;
  if (!lead()) return;
  const std::string not_cached = remember_peak(peak_key, measured);
  peak_source += not_cached.empty() ? fmt::format(", the best so far ({})", peak_cache_path())
                                    : fmt::format(" (not cached: {})", not_cached);
}

void Session::start_services() {
  heartbeat = std::make_unique<Heartbeat>(*ranks.group, config.training.stall_timeout);
  services_clock.reset();
}

void Session::stop_services() {
  service_cost = largest_over_ranks(
      *ranks.group, this_rank_service_cost(heartbeat.get(), services_clock.seconds(),
                                           trainer->background_writer_cpu_seconds()));
  heartbeat.reset();
}

double Session::mfu(double tokens_per_s) {
  const double achieved = tokens_per_s * trainer->model().flops_per_token() / 1e9;
  if (std::isfinite(achieved) && peak_gflops > 0 && achieved > peak_gflops) {
    // For this run only: the model's FLOPs are an estimate (attention counted at full
    // block_size), so a step's rate is no measured peak to keep for later runs.
    peak_note = fmt::format(
        "mfu: this step computed {:.0f} GFLOP/s, more than the matmul peak of {:.0f} ({}): the "
        "peak is raised to the step's rate for the rest of this run, so this step reads 100%?!",
        achieved, peak_gflops, peak_source);
    peak_gflops = achieved;
    peak_source = "raised to a training step's rate";
  }
  return achieved / peak_gflops;
}

bool mfu_plausible(double mfu) {
  return std::isfinite(mfu) && mfu > 0 && mfu < 1.0;
}

std::string mfu_text(double mfu) {
  if (mfu_plausible(mfu)) return fmt::format("{:.1f}%", 100 * mfu);
  if (!std::isfinite(mfu) || mfu <= 0) return "?!";
  return fmt::format("{:.1f}%?!", 100 * std::min(mfu, 1.0));
}

nlohmann::json op_times_json(const OpTimes& ms) {
  nlohmann::json j = nlohmann::json::object();
  for (int k = 0; k < kOpKinds; ++k) j[std::string(op_kind_name(OpKind(k)))] = ms[size_t(k)];
  return j;
}

int use_threads(const Config& config, int ranks_on_node) {
  return use_threads_per_rank(int(config.training.threads), ranks_on_node);
}

Dataset load_data(const Config& config) {
  return Dataset::open(config.data, config.model.vocab_size, config.training.seq_len);
}

Session open_session(const CommonOptions& options, const std::function<void(Config&)>& adjust,
                     const std::function<void(Session&)>& before_work) {
  Session s;
  s.ranks = start_ranks();
  ProcessGroup& group = *s.ranks.group;
  std::unique_ptr<Model> model;
  agree_on_startup(group, [&] {
    s.config = load_config(options.config, options.overrides);
    adopt_init_from_model(s.config, options.overrides);
    set_startup_timeout(s.config.training.startup_timeout);
    if (adjust) adjust(s.config);
    if (s.lead()) write_runnable_world_sizes(s.config, group.size());
    s.restart = restart_notice_from_environment();
    if (s.restart)
      s.restart_changes = adapt_config_to_restart(s.config, group.size(), group.nodes());
    s.threads = use_threads(s.config, s.ranks.ranks_on_node);
    s.data.emplace(load_data(s.config));
    check_validation_split(s.config, *s.data);
    // The model once: parameter specs only (no memory), measured by the peak, then the
    // trainer's.
    model = make_model(s.config, tp_slice_of(s.config, group.rank(), group.size()));
  });
  // Before anything is allocated or measured; the machine's memory (ulimit -v) may differ
  // between ranks, so the ranks agree on the outcome.
  agree_on_startup(group,
                   [&] { run_agreed(group, [&] { check_memory_fits(s.config, *model, group); }); });
  if (before_work) before_work(s);
  apply_matmul_settings(s.config);
  s.test_peak_gflops = options.test_peak_gflops;
  s.measure_peak(model.get());
  reset_peak_rss();  // the peak measurement's matrices are not part of training
  reset_tensor_memory_peak();
  s.baseline_rss_mib = current_rss_mib();
  agree_on_startup(group, [&] {
    s.trainer = std::make_unique<ShardedTrainer>(s.config, *s.data, group, std::move(model));
  });
  return s;
}

namespace {

// "shm", "ring", ...: how `group`'s backend moves a buffer of `bytes`; "-" for a group of one.
std::string transport_on(const ProcessGroup& group, OpType op, size_t bytes) {
  return group.size() == 1 ? "-" : group.transport(op, bytes);
}

int node_count(const ProcessGroup& group) {
  std::vector<int> nodes = group.nodes();
  std::sort(nodes.begin(), nodes.end());
  return int(std::unique(nodes.begin(), nodes.end()) - nodes.begin());
}

// What the mesh line adds about TP: sequence parallelism, and how many ranks keep each KV head
// when there are fewer KV heads than TP ranks. Empty without either.
std::string tp_notes(bool sequence_parallel, const Model& model) {
  std::vector<std::string> notes;
  if (sequence_parallel) notes.push_back("sequence parallel");
  for (const ParamSpec& spec : model.param_specs())
    if (spec.sliced() && spec.tp_replicas > 1) {
      notes.push_back(fmt::format("each KV head kept by {} ranks", spec.tp_replicas));
      break;
    }
  return notes.empty() ? "" : fmt::format(" ({})", fmt::join(notes, ", "));
}

// "group 'shard0' (2 ranks on 1 node)"
std::string group_label(const char* kind, const ProcessGroup& g) {
  const int nodes = node_count(g);
  return fmt::format("{} group '{}' ({} rank{} on {} node{})", kind, g.name(), g.size(),
                     g.size() == 1 ? "" : "s", nodes, nodes == 1 ? "" : "s");
}

// Each of this rank's groups with how its collectives travel, for a unit of `unit_bytes`.
std::string group_transports(const Config& c, ShardedTrainer& t, size_t unit_bytes,
                             bool sequence_parallel) {
  DeviceMesh& mesh = t.mesh();
  ProcessGroup& shard = mesh.shard_group();
  std::string groups =
      fmt::format("{}: all-gather {}, reduce-scatter {}", group_label("shard", shard),
                  transport_on(shard, OpType::all_gather, unit_bytes),
                  transport_on(shard, OpType::reduce_scatter, unit_bytes));
  if (ProcessGroup* replicas = mesh.replica_group()) {
    // Its FP32 gradient shards lie in its symmetric memory on one node (FsdpRuntime), where
    // start-up reserved some.
    const bool in_place = replicas->size() > 1 && replicas->symmetric_capacity() > 0;
    groups += fmt::format(
        "; {}: all-reduce {}", group_label("replica", *replicas),
        in_place ? std::string("shm in place") : transport_on(*replicas, OpType::all_reduce, 0));
  }
  if (ProcessGroup* tp = mesh.tp_group()) {
    const size_t activation_bytes = size_t(tp_activation_bytes(c, mesh.shape()));
    // The model's operands go to the group's symmetric memory at the first step (a warning
    // then if the node has no room for it).
    const bool in_place = c.sharding.symmetric_memory && tp->size() > 1 && node_count(*tp) == 1;
    const OpType op = sequence_parallel ? OpType::reduce_scatter : OpType::all_reduce;
    groups += fmt::format(
        "; {}: {} of a {:.1f} MiB activation {}", group_label("TP", *tp),
        sequence_parallel ? "all-gather and reduce-scatter" : "all-reduce",
        double(activation_bytes) / kMiB,
        in_place ? std::string("shm in place") : transport_on(*tp, op, activation_bytes));
  }
  if (ProcessGroup* reshard = t.fsdp().reshard_group())
    groups += fmt::format("; {}: all-gather {}", group_label("reshard", *reshard),
                          transport_on(*reshard, OpType::all_gather, unit_bytes));
  return groups;
}

// The node map, the mesh, each group's algorithm and the bytes a step moves per link class.
void print_mesh(Session& s) {
  const Config& c = s.config;
  ShardedTrainer& t = *s.trainer;
  DeviceMesh& mesh = t.mesh();
  int64_t largest = 0;
  for (const auto& u : t.fsdp().units()) largest = std::max(largest, u.padded_numel);
  const size_t unit_bytes = size_t(largest) * dtype_size(c.precision.param_dtype);
  const bool sequence_parallel = mesh.shape().tp > 1 && c.parallel.sequence_parallel;
  fmt::print("nodes: {} ({}{}) | mesh: {}{}{}\n", node_count(mesh.world()), mesh.node_map(),
             c.sharding.ranks_per_node > 0 ? ", from sharding.ranks_per_node" : "", mesh.describe(),
             tp_notes(sequence_parallel, t.model()),
             mesh.replica_group()
                 ? fmt::format(" | replica_sync {}", replica_sync_name(c.sharding.replica_sync))
                 : "");
  fmt::print("collectives (this rank's groups, for a {:.1f} MiB unit): {}\n",
             double(unit_bytes) / kMiB, group_transports(c, t, unit_bytes, sequence_parallel));
  ProcessGroup& shard = mesh.shard_group();
  const QuantizedPlan& q = t.fsdp().quantized();
  std::vector<std::string> quantized;
  if (q.gather)
    quantized.push_back(fmt::format(
        "all-gathers {} (blocks of {} with an FP32 scale, decoded to {} on arrival)",
        quantization_name(c.sharding.gather_quantization),
        quant_block(c.sharding.gather_quantization), dtype_name(c.precision.param_dtype)));
  const char* rq = quantization_name(c.sharding.reduce_quantization);
  if (q.reduce_per_node)
    quantized.push_back(fmt::format(
        "reduce-scatters summed in FP32 within each node ({} rank{}), then {} across {} nodes "
        "(an all-to-all, FP32 sums)",
        q.reduce_per_node, q.reduce_per_node == 1 ? "" : "s", rq,
        shard.size() / q.reduce_per_node));
  if (q.replicas)
    quantized.push_back(
        fmt::format("the replica all-reduce {} (an all-to-all and an all-gather)", rq));
  if (!quantized.empty()) fmt::print("quantized collectives: {}\n", fmt::join(quantized, "; "));
  const Traffic tr = t.traffic();
  if (mesh.pipeline_group())
    fmt::print(
        "traffic per step: each rank sends {:.1f} MiB to its neighbouring stages; within its "
        "stage all-gathers {:.1f} MiB, reduce-scatters {:.1f} MiB{}; over the links, whole job: "
        "intra-node {:.1f} MiB, inter-node {:.1f} MiB\n",
        double(tr.pipeline_sent) / kMiB, double(tr.gathered) / kMiB, double(tr.scattered) / kMiB,
        mesh.replica_group()
            ? fmt::format(", all-reduces {:.1f} MiB across replicas", double(tr.replicated) / kMiB)
            : "",
        double(tr.intra_node) / kMiB, double(tr.inter_node) / kMiB);
  if (mesh.pipeline_group()) return;
  fmt::print(
      "traffic per step: each rank all-gathers {:.1f} MiB{}, reduce-scatters {:.1f} MiB{}{}; "
      "over the links, whole job: intra-node {:.1f} MiB, inter-node {:.1f} MiB\n",
      double(tr.gathered) / kMiB,
      tr.regathered
          ? fmt::format(" ({:.1f} MiB of it within reshard groups)", double(tr.regathered) / kMiB)
          : "",
      double(tr.scattered) / kMiB,
      mesh.replica_group()
          ? fmt::format(", all-reduces {:.1f} MiB across replicas", double(tr.replicated) / kMiB)
          : "",
      mesh.tp_group()
          ? fmt::format(", {} {:.1f} MiB of activations in its TP group",
                        sequence_parallel ? "all-gathers and reduce-scatters" : "all-reduces",
                        double(tr.tp_reduced) / kMiB)
          : "",
      double(tr.intra_node) / kMiB, double(tr.inter_node) / kMiB);
}

}  // namespace

std::string oversubscription_warning(int threads, int ranks_on_node, int cores,
                                     bool threads_automatic) {
  if (int64_t(threads) * ranks_on_node <= cores) return "";
  // training.threads = 0 already splits the cores; then only fewer ranks per node would help.
  const std::string advice = threads_automatic
                                 ? fmt::format("run at most {} rank{} per node for full speed",
                                               cores, cores == 1 ? "" : "s")
                                 : "set training.threads = 0 to split the cores";
  return fmt::format(
      "warning: {} thread{} x {} rank{} on this node = {} threads for {} cores: they will "
      "compete ({})",
      threads, threads == 1 ? "" : "s", ranks_on_node, ranks_on_node == 1 ? "" : "s",
      int64_t(threads) * ranks_on_node, cores, advice);
}

namespace {

// The CPU, ranks and threads, oneDNN and the matmul paths, the matmul peak, oversubscription.
void print_machine_summary(const Session& s) {
  const Config& c = s.config;
  const CpuFeatures& cpu = cpu_features();
  fmt::print("shardtrain | cpu: {} | {} rank{} ({}) x {} thread{}\n", cpu.summary(), s.ranks.size(),
             s.ranks.size() == 1 ? "" : "s", s.ranks.mpi ? "mpirun" : "in-process, no mpirun",
             s.threads, s.threads == 1 ? "" : "s");
  fmt::print(
      "oneDNN {} | bf16 matmul: {} | fp32 matmul: {} | bf16 conversion: {} | elementwise: {}\n",
      onednn_version(), bf16_matmul_path_summary(), fp32_matmul_summary(),
      bf16_kernel_name(active_bf16_kernel()), elementwise_kernel_name());
  fmt::print("matmul peak ({} matmul{}, MFU's denominator): {:.0f} GFLOP/s (all ranks; {})\n",
             dtype_name(s.peak_dtype),
             s.peak_dtype != c.precision.param_dtype ? ", which bf16 is widened to" : "",
             s.peak_gflops, s.peak_source);
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  const std::string warning =
      oversubscription_warning(s.threads, s.ranks.ranks_on_node, cores, c.training.threads == 0);
  if (!warning.empty()) fmt::print("{}\n", warning);
}

// The model, the data, the units and what each gradient-accumulation mode costs.
void print_model_summary(Session& s) {
  const Config& c = s.config;
  ShardedTrainer& t = *s.trainer;
  int64_t params = 0, slices = 0;
  for (const auto& spec : t.model().param_specs()) {
    slices += spec.numel();
    params += shape_numel(spec.whole_shape());
  }
  const int tp = t.mesh().shape().tp;
  fmt::print("model: {} | {} parameters{} | precision: param {} reduce {} output {}\n",
             t.model().describe(), params,
             tp > 1 ? fmt::format(" (each TP rank's slices: {}, split {} ways)", slices, tp) : "",
             dtype_name(c.precision.param_dtype), dtype_name(c.precision.reduce_dtype),
             dtype_name(c.precision.output_dtype));
  fmt::print(
      "data: {} ({} train / {} val tokens) | global batch {} x {} tokens in {} micro-batch{}\n",
      s.data->source(), s.data->train().size(), s.data->val().size(), c.training.global_batch,
      c.training.seq_len, c.training.micro_batches, c.training.micro_batches == 1 ? "" : "es");
  const auto& units = t.fsdp().units();
  int64_t largest = 0, padded = 0;
  for (const auto& u : units) {
    largest = std::max(largest, u.padded_numel);
    padded += u.padded_numel;
  }
  fmt::print(
      "sharding: {} units (root + {} blocks), largest {} elements | reshard_after_forward {} "
      "({}) | prefetch {} | collectives {}\n",
      units.size(), t.fsdp().topology().blocks(), largest,
      find_key("sharding.reshard_after_forward", "").show(c),
      c.sharding.reshard_to
          ? fmt::format("ZeRO-3, hpZ: a 1/{} slice kept, the backward gathers within {} ranks",
                        c.sharding.reshard_to, c.sharding.reshard_to)
          : std::string(c.sharding.reshard_after_forward ? "ZeRO-3" : "ZeRO-2"),
      c.sharding.prefetch, algorithm_name(c.sharding.collective_algorithm));
  const int64_t m = c.training.micro_batches;
  const double scatter_mib = 4.0 * double(padded) / kMiB;
  if (t.sharded().pipeline()) return print_pipeline_summary(s);
  if (gradients_in_place(t.mesh().shard_group().size(), t.fsdp().quantized().reduce_per_node > 0,
                         c.sharding.accumulation, int(m))) {
    fmt::print(
        "accumulation {}: alone in its shard group, the backward accumulates into the FP32 "
        "gradient shards in place (no unsharded gradient, no reduce-scatter){}\n",
        accumulation_name(c.sharding.accumulation),
        t.mesh().replica_group() ? "; they are all-reduced over the replicas once a step" : "");
    return;
  }
  if (c.sharding.accumulation == Accumulation::reduce_each)
    fmt::print(
        "accumulation reduce_each: reduce-scatters {:.1f} MiB per micro-batch ({:.1f} MiB per "
        "step); no unsharded gradient outlives its unit's backward. reduce_last would keep "
        "{:.1f} MiB of unsharded FP32 gradients and reduce-scatter once ({:.1f} MiB per step)\n",
        scatter_mib, scatter_mib * double(m), scatter_mib, scatter_mib);
  else
    fmt::print(
        "accumulation reduce_last: keeps {:.1f} MiB of unsharded FP32 gradients across "
        "micro-batches and reduce-scatters {:.1f} MiB once per step. reduce_each would "
        "reduce-scatter {:.1f} MiB per step and keep none\n",
        scatter_mib, scatter_mib, scatter_mib * double(m));
}

// The memory budget per rank, activations per checkpointing mode, what is held now.
void print_memory_summary(Session& s) {
  const Config& c = s.config;
  ShardedTrainer& t = *s.trainer;
  const MemoryBudget b = t.budget();
  const FsdpMemory fm = t.fsdp().memory();
  fmt::print(
      "memory per rank (budget): shards {:.1f} + optimizer {:.1f} + unsharded params {:.1f}{} + "
      "unsharded grads {:.1f}{} + activations {:.1f}{}{} = {:.1f} MiB, on top of {:.1f} MiB of "
      "libraries and data\n",
      double(b.master_and_grad) / kMiB, double(b.optimizer_state) / kMiB,
      double(b.unsharded_params) / kMiB,
      b.kept_slices ? fmt::format(" + kept slices (hpZ) {:.1f}", double(b.kept_slices) / kMiB) : "",
      double(b.unsharded_grads) / kMiB,
      b.quantized_buffers
          ? fmt::format(" + quantized collectives {:.1f}", double(b.quantized_buffers) / kMiB)
          : "",
      double(b.activations) / kMiB,
      b.matmul_workspace
          ? fmt::format(" + matmul packing {:.1f}", double(b.matmul_workspace) / kMiB)
          : "",
      b.checkpoint_staging
          ? fmt::format(" + checkpoint staging {:.1f}", double(b.checkpoint_staging) / kMiB)
          : "",
      double(b.total()) / kMiB, s.baseline_rss_mib);
  if (const auto* blocks = dynamic_cast<const BlockModel*>(&t.model())) {
    // Each data-parallel place's rows (a TP group's ranks share them).
    const int64_t rows = rows_per_data_rank(c, t.mesh().shape());
    std::string modes;
    for (const auto mode : {ActivationCheckpointing::none, ActivationCheckpointing::selective,
                            ActivationCheckpointing::full})
      modes += fmt::format(
          "{}{} {:.1f}", modes.empty() ? "" : " | ", activation_checkpointing_name(mode),
          double(blocks->activation_bytes_for(rows, c.training.seq_len, mode)) / kMiB);
    fmt::print("activations per rank by sharding.activation_checkpointing: {} MiB (this run: {})\n",
               modes, activation_checkpointing_name(c.sharding.activation_checkpointing));
  }
  fmt::print("memory per rank (held now): shards {:.1f} MiB, optimizer state {:.1f} MiB\n",
             double(fm.shard_bytes) / kMiB, double(t.optimizer_state_bytes()) / kMiB);
}

}  // namespace

void print_summary(Session& s) {
  if (!s.lead()) return;
  const Config& c = s.config;
  for (const std::string& renamed : c.renamed_keys) {
    const size_t arrow = renamed.find(" -> ");
    fmt::print("config: {} is now {} (read as it; the old name will go)\n",
               renamed.substr(0, arrow), renamed.substr(arrow + 4));
  }
  print_machine_summary(s);
  print_model_summary(s);
  print_mesh(s);
  if (s.ranks.size() > 1)
    fmt::print(
        "collective timeout: {} (training.stall_timeout: a rank silent, stuck outside the "
        "collectives, or cut off by its link that long ends the job, named; a shorter outage "
        "is waited out)\n",
        c.training.stall_timeout > 0 ? fmt::format("{:g} s", c.training.stall_timeout)
                                     : std::string("off"));
  print_memory_summary(s);
  std::fflush(stdout);
}

}  // namespace st
