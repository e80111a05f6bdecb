#include "launch/sharded_trainer.hpp"

#include <omp.h>
#include <filesystem>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "api/phase_clock.hpp"
#include "api/rank_context.hpp"
#include "checkpoint/hf_weights.hpp"
#include "collectives/agreement.hpp"
#include "collectives/mpi_runtime.hpp"
#include "core/json_parse.hpp"
#include "core/memory_stats.hpp"
#include "core/ops/matmul_path.hpp"
#include "core/ops/packed_gemm.hpp"
#include "core/timer.hpp"
#include "core/trace.hpp"
#include "launch/model_factory.hpp"
#include "optim/clip.hpp"

namespace st {

FsdpOptions fsdp_options(const Config& config) {
  FsdpOptions o;
  o.param_dtype = config.precision.param_dtype;
  o.reshard_after_forward = config.sharding.reshard_after_forward;
  o.reshard_to = int(config.sharding.reshard_to);
  o.prefetch = int(config.sharding.prefetch);
  o.accumulation = config.sharding.accumulation;
  o.replica_sync = config.sharding.replica_sync;
  o.gather_quantization = config.sharding.gather_quantization;
  o.reduce_quantization = config.sharding.reduce_quantization;
  o.symmetric_memory = config.sharding.symmetric_memory;
  return o;
}

LrSchedule lr_schedule(const Config& config) {
  const auto& s = config.schedule;
  return {.lr = float(s.lr),
          .min_lr = float(s.min_lr),
          .warmup_steps = s.warmup_steps,
          .max_steps = config.training.max_steps,
          .kind = s.kind,
          .decay_fraction = s.decay_fraction,
          .decay_shape = s.decay_shape};
}

namespace {

// The world the mesh is made from: a copy of it with the collective algorithm the config asks
// for and (ranks_per_node > 0) each consecutive ranks_per_node ranks on one pretend node.
ProcessGroup& placed_world(const Config& config, ProcessGroup& world,
                           std::unique_ptr<ProcessGroup>& copy) {
  copy = world.split(0, world.rank(), world.name(),
                     {.algorithm = config.sharding.collective_algorithm});
  if (config.sharding.ranks_per_node > 0)
    copy->set_node_map(pretend_node_map(world.size(), int(config.sharding.ranks_per_node)));
  return *copy;
}

}  // namespace

ShardedTrainer::ShardedTrainer(const Config& config, const Dataset& data, ProcessGroup& group,
                               std::unique_ptr<Model> model)
    : config_(config), data_(data), group_(group), model_(std::move(model)) {
  ST_CHECK(model_ != nullptr, "the trainer is given the config's model (make_model)");
  // Again here: a command may have set keys after load_config validated them (bench checkpoint
  // sets checkpoint.dir), and what TP cannot compose with must still be refused.
  validate_for_world(config, group.size());
  mesh_ = std::make_unique<DeviceMesh>(placed_world(config, group, placed_world_),
                                       mesh_shape(config, group.size()));
  if (mesh_->shape().dp_replicate > 1 && mesh_->shard_groups_span_nodes() &&
      !config.sharding.allow_cross_node_shard)
    fail_input(
        "parallel.dp_shard = {} puts shard groups across nodes ({}) while "
        "parallel.dp_replicate = {} > 1: every all-gather and reduce-scatter would cross the "
        "slow link. Make dp_shard divide the ranks per node, or set "
        "sharding.allow_cross_node_shard = true",
        mesh_->shape().dp_shard, mesh_->node_map(), mesh_->shape().dp_replicate);
  if (mesh_->shape().tp > 1 && mesh_->tp_groups_span_nodes() &&
      !config.parallel.allow_cross_node_tp)
    fail_input(
        "parallel.tp = {} puts TP groups across nodes ({}): every block's activations would cross "
        "the slow link four times a micro-batch. Make tp divide the ranks per node, or set "
        "parallel.allow_cross_node_tp = true",
        mesh_->shape().tp, mesh_->node_map());
  ShardPolicy policy;
  policy.fsdp = fsdp_options(config);
  policy.seed = uint64_t(config.training.seed);
  policy.optimizer = config.optimizer;
  policy.grad_clip = config.training.grad_clip;
  policy.pipeline = pipeline_options(config);
  policy.seq_len = config.training.seq_len;
  sharded_ = std::make_unique<ShardedModel>(*model_, *mesh_, policy);
  if (!config.training.init_from.empty())
    load_safetensors(config.training.init_from, sharded_->runtime());
  for (const UnitLayout& u : fsdp().units()) unit_names_.push_back(u.name);
  if (config.checkpoint.async && !config.checkpoint.dir.empty()) {
    // Without MPI_THREAD_MULTIPLE every group shares one communication thread: a commit waiting
    // for a slow rank's files would hold up the training group's collectives behind it.
    if (mpi_is_initialized() && !mpi_thread_multiple())
      background_off_ =
          "MPI did not grant MPI_THREAD_MULTIPLE, so a background commit would share the "
          "training's communication thread";
    else
      async_ = std::make_unique<AsyncCheckpointer>(
          group_, mesh_->pipeline_group() ? mesh_->whole_model_group() : fsdp().model_group(),
          mesh_->pipeline_group(), fsdp(), int(checkpoint_states().size()),
          config.checkpoint.async_timeout);
  }
  schedule_ = lr_schedule(config);
  budget_ = budget_for(fsdp().units(), sharded_->optimizer().states_per_element());
}

namespace {

// The trainer's view of the library's step: each micro-batch's forward and backward timed
// (PhaseClock: split at the end of the forward, units traced), the last reductions and the
// update timed and traced. It only watches: nothing here waits.
class TrainerStepObserver final : public StepObserver {
 public:
  TrainerStepObserver(StepStats& s, const std::vector<std::string>& unit_names)
      : s_(s), unit_names_(unit_names) {}

  UnitHooks& micro_batch_hooks(int, UnitHooks& runtime) override {
    return phases_.emplace(runtime, &unit_names_);
  }
  void after_micro_batch(int) override {
    s_.forward_ms += phases_->forward_end_ms;
    s_.backward_ms += phases_->clock.ms() - phases_->forward_end_ms;
    phases_.reset();
  }
  void before(StepPhase phase) override {
    if (phase == StepPhase::finish_backward)
      span_.emplace("finish backward (last reduce-scatters)");
    else
      span_.emplace("optimizer (norm all-reduce, clip, AdamW)");
    clock_ = Timer();
  }
  void after(StepPhase phase) override {
    (phase == StepPhase::finish_backward ? s_.backward_ms : s_.optimizer_ms) += clock_.ms();
    span_.reset();
  }

 private:
  StepStats& s_;
  const std::vector<std::string>& unit_names_;
  std::optional<PhaseClock> phases_;
  std::optional<TraceScope> span_;
  Timer clock_;
};

}  // namespace

// One step: the library's (ShardedModel::step) over this rank's rows of each micro-batch, with
// its phases timed and traced, then the stats every rank agrees on.
StepStats ShardedTrainer::step(int64_t step) {
  StepStats s;
  s.step = step;
  s.lr = schedule_.at(step);
  s.tokens = config_.training.global_batch * config_.training.seq_len;
  Timer step_clock;
  reset_thread_op_times();
  TraceScope step_span(fmt::format("step {}", step + 1), true);
  std::vector<Batch> micro_batches;
  for (int64_t micro = 0; micro < config_.training.micro_batches; ++micro)
    micro_batches.push_back(rows_of(step, micro));
  TrainerStepObserver observer(s, unit_names_);
  // Every token of the global step weighs the same, whichever rank holds it.
  const double loss_sum = sharded_->accumulate_gradients(micro_batches, s.tokens, &observer);
  // A background save's writer copies the masters and moments while forward and backward run;
  // the update changes them, so it waits for the copy.
  if (async_) s.checkpoint_stage_wait_ms = async_->wait_until_staged();
  const StepResult r = sharded_->apply_update(loss_sum, s.tokens, s.lr, &observer);
  s.loss = r.loss;
  s.grad_norm = r.grad_norm;
  s.step_ms = step_clock.ms();
  s.op_ms = thread_op_times();
  agree_on_stats(r, s);
  return s;
}

Batch ShardedTrainer::rows_of(int64_t step, int64_t micro) const {
  const auto& t = config_.training;
  const int64_t rows_per_micro = t.global_batch / t.micro_batches;
  // Each data-parallel place reads its own rows (parallel/mesh_layout: the data rank).
  const int64_t rows_per_rank = rows_per_data_rank(config_, mesh_->shape());
  const int64_t first = micro * rows_per_micro + mesh_->data_rank() * rows_per_rank;
  return training_batch(data_.train(), uint64_t(t.seed), step, t.global_batch, first,
                        first + rows_per_rank, t.seq_len);
}

void ShardedTrainer::agree_on_stats(const StepResult& r, StepStats& s) {
  s.comm = r.comm;
  s.memory = r.memory;
  s.pipeline = r.pipeline;
  // Every rank's step time, peak RSS, pipeline compute and pipeline run time, each in its own
  // slot: one sum all-reduce.
  const int W = group_.size(), me = group_.rank();
  Tensor per_rank = Tensor::zeros("step_per_rank", {4 * W}, DType::f64);
  double* slot = per_rank.data<double>();
  slot[me] = s.step_ms;
  slot[W + me] = peak_rss_mib();
  slot[2 * W + me] = r.pipeline.compute_ms;
  slot[3 * W + me] = r.pipeline.step_ms;
  group_.all_reduce(per_rank)->wait();
  const double* v = per_rank.data<double>();
  s.rank_step_ms.assign(v, v + W);
  s.rank_peak_rss_mib.assign(v + W, v + 2 * W);
  s.slowest_step_ms = *std::max_element(v, v + W);
  s.max_peak_rss_mib = *std::max_element(v + W, v + 2 * W);
  const double longest = *std::max_element(v + 3 * W, v + 4 * W);
  double computed = 0;
  for (int k = 0; k < W; ++k) computed += v[2 * W + k] / W;
  s.pp_bubble = longest > 0 ? 1.0 - computed / longest : 0.0;
}

int64_t ShardedTrainer::validation_windows(int64_t max_windows) const {
  return std::min(max_windows, window_count(data_.val(), config_.training.seq_len));
}

double ShardedTrainer::evaluate(int64_t max_windows) {
  const int64_t T = config_.training.seq_len;
  const int64_t windows = validation_windows(max_windows);
  if (windows == 0) return NAN;
  const double sum = sharded_->loss_sum_over_windows(
      windows, config_.training.global_batch,
      [&](int64_t first, int64_t rows) { return window_batch(data_.val(), first, rows, T); });
  return sum / double(windows * T);
}

MemoryBudget ShardedTrainer::budget() const {
  return budget_;
}

MemoryBudget ShardedTrainer::budget_for(const std::vector<UnitLayout>& units,
                                        int states_per_element) const {
  return config_memory_budget(config_, *model_, units, states_per_element, group_.size());
}

PipelineOptions pipeline_options(const Config& config) {
  PipelineOptions o;
  o.schedule = config.parallel.pp_schedule;
  o.virtual_stages = int(config.parallel.pp_virtual_stages);
  o.layers = config.parallel.pp_layers;
  o.wire_dtype = config.parallel.pp_boundary_dtype;
  return o;
}

// `units` as pipeline rank `rank` holds them: the others' sizes zero (their layouts stay, so a
// unit's index is still its place).
std::vector<UnitLayout> held_layouts(const std::vector<UnitLayout>& units, const Model& model,
                                     const std::vector<StageRange>& split, int ranks, int rank) {
  std::vector<UnitLayout> held = units;
  const std::vector<int> mine = pipeline_held_units(model, split, ranks, rank);
  for (UnitLayout& u : held)
    if (std::find(mine.begin(), mine.end(), u.unit) == mine.end())
      u.shard_numel = u.padded_numel = 0;
  return held;
}

namespace {

// Under pipeline parallelism, the budget of the pipeline rank that needs the most: its stages'
// units alone (the others count nothing), each gathered and with its FP32 gradient for the
// whole step (FsdpRuntime::hold_for_step), and each of its stages' activations times the
// micro-batches its schedule holds in flight there at once (and zero bubble's deferred weight
// halves). Not counted: the boundary buffers (a few per rank).
MemoryBudget pipeline_memory_budget(const Config& config, const Model& model,
                                    const BudgetInputs& base, const MeshShape& mesh, int64_t rows,
                                    std::vector<MemoryBudget>* per_rank) {
  const PipelineOptions options = pipeline_options(config);
  const std::vector<StageRange> split =
      pipeline_split(model, mesh.pp, options, config.training.seq_len);
  const PipelineSchedule schedule(
      options.schedule, {mesh.pp, options.virtual_stages, int(config.training.micro_batches)});
  MemoryBudget most;
  for (int r = 0; r < mesh.pp; ++r) {
    const std::vector<UnitLayout> held = held_layouts(*base.units, model, split, mesh.pp, r);
    // Each stage keeps a set of activations per micro-batch between its forward and its
    // backward (or input half): the most its rank's list has in flight at once, per stage.
    // Zero bubble's deferred weight halves hold copies of their matmuls' operands, counted as
    // a set each (the inputs and output gradients of the stage's linears: about its kept
    // activations), as many as the list defers at once.
    std::map<int, int> in_flight, peak, deferred, deferred_peak;
    for (const PipeAction& a : schedule.actions(r)) {
      if (a.op == PipeOp::forward) peak[a.stage] = std::max(peak[a.stage], ++in_flight[a.stage]);
      if (a.op == PipeOp::backward || a.op == PipeOp::backward_input) --in_flight[a.stage];
      if (a.op == PipeOp::backward_input)
        deferred_peak[a.stage] = std::max(deferred_peak[a.stage], ++deferred[a.stage]);
      if (a.op == PipeOp::backward_weight) --deferred[a.stage];
    }
    int64_t activation_bytes = 0;
    for (const auto& [stage, sets] : peak)
      activation_bytes +=
          (sets + deferred_peak[stage]) *
          model.stage_activation_bytes(rows, config.training.seq_len, stage_blocks(split, stage));
    BudgetInputs in = base;
    in.units = &held;
    in.reduce_last = true;
    in.grads_in_place = gradients_in_place(mesh.dp_shard, base.quantized.reduce_per_node > 0,
                                           Accumulation::reduce_last, 2);
    in.reshard_after_forward = false;
    in.reshard_to = 0;
    in.activation_bytes = activation_bytes;
    MemoryBudget b = memory_budget(in);
    // Background saves stage the rank's own shards: its stages' units.
    if (config.checkpoint.async && !config.checkpoint.dir.empty())
      b.checkpoint_staging = AsyncCheckpointer::staging_bytes(held, 1 + base.optimizer_moments);
    if (per_rank) per_rank->push_back(b);
    if (b.total() > most.total()) most = b;
  }
  return most;
}

}  // namespace

MemoryBudget config_memory_budget(const Config& config, const Model& model,
                                  const std::vector<UnitLayout>& units, int states_per_element,
                                  int world_size, std::vector<MemoryBudget>* per_pipeline_rank) {
  const auto& t = config.training;
  const MeshShape mesh = mesh_shape(config, world_size);
  // The ranks of a TP group hold the same rows (each its slices of their activations).
  const int64_t rows = rows_per_data_rank(config, mesh);
  int64_t activations = 0;
  try {
    activations = model.activation_bytes(rows, t.seq_len);
  } catch (const Error& e) {
    fail_input(
        "the activations of one micro-batch ({} rows x training.seq_len = {} tokens per rank) "
        "cannot be sized: {}. Reduce training.global_batch, training.seq_len or the model",
        rows, t.seq_len, e.what());
  }
  // Quantized collectives as planned for the config's node map; where nodes are detected at
  // run time, as if a node held 2 ranks of a shard group (the most these buffers can take).
  const auto& s = config.sharding;
  QuantizedPlan quantized;
  quantized.gather = s.gather_quantization != Quantization::none;
  if (s.reduce_quantization != Quantization::none) {
    const int per_node = s.ranks_per_node > 0 ? int(s.ranks_per_node) : 2;
    quantized.reduce_per_node = per_node < mesh.dp_shard ? per_node : 0;
    quantized.replicas = mesh.dp_replicate > 1;
  }
  const BudgetInputs inputs{&units,
                            config.precision.param_dtype,
                            int(s.prefetch),
                            states_per_element,
                            s.accumulation == Accumulation::reduce_last && t.micro_batches > 1,
                            gradients_in_place(mesh.dp_shard, quantized.reduce_per_node > 0,
                                               s.accumulation, int(t.micro_batches)),
                            s.reshard_after_forward,
                            int(s.reshard_to),
                            activations,
                            quantized,
                            s.gather_quantization,
                            s.reduce_quantization,
                            mesh.dp_shard,
                            mesh.dp_replicate};
  MemoryBudget budget =
      mesh.pp > 1 ? pipeline_memory_budget(config, model, inputs, mesh, rows, per_pipeline_rank)
                  : memory_budget(inputs);
  // The widened BF16 path (and the packed FP32 engine) packs operands into per-thread buffers
  // instead of copying them whole to FP32: a few MiB per thread, whatever the model's size.
  if (packed_gemm_runs(config.precision.param_dtype))
    budget.matmul_workspace =
        int64_t(packed_gemm_workspace_bytes_per_thread()) * omp_get_max_threads();
  if (config.checkpoint.async && !config.checkpoint.dir.empty() && mesh.pp == 1)
    budget.checkpoint_staging = AsyncCheckpointer::staging_bytes(units, 1 + states_per_element);
  if (per_pipeline_rank)
    for (MemoryBudget& b : *per_pipeline_rank) b.matmul_workspace = budget.matmul_workspace;
  return budget;
}

void check_memory_fits(const Config& config, const Model& model, const ProcessGroup& group) {
  const int S = mesh_shape(config, group.size()).dp_shard;
  const int states = states_per_element(config.optimizer.kind);
  const MemoryBudget b = config_memory_budget(
      config, model, layout_units(model.param_specs(), model.num_units(), S), states, group.size());
  const std::string beyond = memory_shortfall_on_node(b.total(), group);
  if (beyond.empty()) return;
  const double gib = 1024.0 * kMiB;
  fail_input(
      "the memory budget is {:.2f} GiB per rank (shards {:.2f} + optimizer {:.2f} + unsharded "
      "{:.2f} + activations {:.2f}) {}. Reduce the model (model.n_layer, model.n_embd, "
      "model.vocab_size), the activations (training.global_batch, training.seq_len, more "
      "training.micro_batches, or sharding.activation_checkpointing = selective or full), or "
      "shard over more ranks (parallel.dp_shard)",
      double(b.total()) / gib, double(b.master_and_grad) / gib, double(b.optimizer_state) / gib,
      double(b.unsharded_params + b.unsharded_grads) / gib, double(b.activations) / gib, beyond);
}

double tp_activation_bytes(const Config& c, const MeshShape& mesh) {
  return double(rows_per_data_rank(c, mesh)) * double(c.training.seq_len * c.model.n_embd) *
         sizeof(float);
}

double tp_collective_bytes(const Model& model, const Config& c, const MeshShape& mesh,
                           const StageBlocks* stage) {
  if (mesh.tp == 1) return 0;
  const ModelWork w = model.work(rows_per_data_rank(c, mesh), c.training.seq_len);
  auto bytes = [](const SegmentWork& s) {
    double sum = 0;
    for (const TpCollective& call : s.tp) sum += call.bytes;
    return sum;
  };
  const bool first = !stage || stage->first_stage, last = !stage || stage->last_stage;
  const double blocks = stage ? stage->end - stage->first : model.num_units() - 1;
  return double(c.training.micro_batches) *
         ((first ? bytes(w.root_forward_pre) + bytes(w.root_backward_post) : 0) +
          (last ? bytes(w.root_forward_post) + bytes(w.root_backward_pre) : 0) +
          blocks * (bytes(w.block_forward) + bytes(w.block_backward)));
}

// Under pipeline parallelism: each stage's FSDP (its units gathered and reduced once a step,
// over the stage's own groups and nodes), the stages' boundaries (every data place's
// micro-batches forward and their gradients back, in param_dtype), and the root unit's gradient
// shards exchanged between the end stages. Bytes per rank are this rank's.
Traffic ShardedTrainer::pipeline_traffic() const {
  const MeshShape mesh = mesh_->shape();
  MeshShape stage_mesh = mesh;
  stage_mesh.pp = 1;
  const int per_stage = int(stage_mesh.world()), me = group_.rank() / per_stage;
  const std::vector<int>& nodes = mesh_->world().nodes();
  const PipelineRuntime& pipe = *sharded_->pipeline();
  Traffic total;
  for (int r = 0; r < mesh.pp; ++r) {
    const std::vector<UnitLayout> held =
        held_layouts(fsdp().units(), *model_, pipe.split(), mesh.pp, r);
    const std::vector<int> stage_nodes(nodes.begin() + r * per_stage,
                                       nodes.begin() + (r + 1) * per_stage);
    // The TP collectives of this pipeline rank's stages (their blocks, the root's parts on the
    // end stages), and the shared slices' gradient sums (this rank's, taken for every stage).
    double tp_bytes = mesh.tp > 1 ? double(sharded_->tp_gradient_sum_bytes()) : 0;
    for (int s = r; s < pipe.stages(); s += mesh.pp) {
      const StageBlocks blocks = stage_blocks(pipe.split(), s);
      tp_bytes += tp_collective_bytes(*model_, config_, mesh, &blocks);
    }
    const Traffic t =
        predict_traffic({&held, stage_mesh, stage_nodes, config_.precision.param_dtype, 1, false, 0,
                         Accumulation::reduce_last, config_.sharding.replica_sync,
                         config_.sharding.gather_quantization, config_.sharding.reduce_quantization,
                         tp_bytes, config_.parallel.sequence_parallel});
    total.intra_node += t.intra_node;
    total.inter_node += t.inter_node;
    if (r == me)
      total.gathered = t.gathered, total.scattered = t.scattered, total.replicated = t.replicated,
      total.tp_reduced = t.tp_reduced;
  }
  const int64_t boundary =
      model_->stage_boundary_numel(rows_per_data_rank(config_, mesh), config_.training.seq_len) *
      int64_t(dtype_size(config_.parallel.pp_boundary_dtype)) * config_.training.micro_batches;
  const auto link = [&](int from, int to, int64_t bytes) {
    (nodes[size_t(from)] == nodes[size_t(to)] ? total.intra_node : total.inter_node) += bytes;
  };
  for (int s = 0; s + 1 < pipe.stages(); ++s)
    for (int k = 0; k < per_stage; ++k) {
      const int a = (s % mesh.pp) * per_stage + k, b = ((s + 1) % mesh.pp) * per_stage + k;
      link(a, b, boundary);                  // the activations
      link(b, a, boundary);                  // their gradients
      if (k == group_.rank() % per_stage) {  // this rank's own place in its stage
        if (a / per_stage == me) total.pipeline_sent += boundary;
        if (b / per_stage == me) total.pipeline_sent += boundary;
      }
    }
  const int64_t root = 4 * fsdp().units()[0].shard_numel;
  for (int k = 0; k < per_stage; ++k) {
    link(k, (mesh.pp - 1) * per_stage + k, root);
    link((mesh.pp - 1) * per_stage + k, k, root);
  }
  if (me == 0 || me == mesh.pp - 1) total.pipeline_sent += root;
  return total;
}

Traffic ShardedTrainer::traffic() const {
  if (sharded_->pipeline()) return pipeline_traffic();
  const auto& s = config_.sharding;
  return predict_traffic({&fsdp().units(), mesh_->shape(), mesh_->world().nodes(),
                          config_.precision.param_dtype, int(config_.training.micro_batches),
                          s.reshard_after_forward, int(s.reshard_to), s.accumulation,
                          s.replica_sync, s.gather_quantization, s.reduce_quantization,
                          tp_collective_bytes(*model_, config_, mesh_->shape()) +
                              double(sharded_->tp_gradient_sum_bytes()),
                          config_.parallel.sequence_parallel});
}

int64_t ShardedTrainer::optimizer_state_bytes() const {
  int64_t bytes = 0;
  for (auto& [name, tensor] : sharded_->optimizer().state()) bytes += int64_t(tensor.nbytes());
  return bytes;
}

}  // namespace st

namespace st {

namespace {

// An absolute path ("" stays ""), so the record means the same from any working folder.
std::string absolute_or_empty(const std::string& path) {
  return path.empty() ? path : std::filesystem::absolute(path).string();
}

// The data position, the data the run trained on (eval evaluates it by default) and the
// tokenizer that made the tokens (export copies its files).
nlohmann::json data_meta(const Config& c, int64_t steps_done) {
  nlohmann::json data = {{"next_sample", steps_done * c.training.global_batch},
                         {"path", absolute_or_empty(c.data.path)},
                         {"tokens", absolute_or_empty(c.data.tokens)},
                         {"val_tokens", absolute_or_empty(c.data.val_tokens)},
                         {"token_format", token_format_name(c.data.token_format)},
                         {"val_fraction", c.data.val_fraction}};
  // data.tokenizer, else the tokenizer.json of the folder training.init_from names.
  const std::string tokenizer = !c.data.tokenizer.empty() ? c.data.tokenizer
                                : c.training.init_from.empty()
                                    ? ""
                                    : weights_tokenizer_json(c.training.init_from);
  if (!tokenizer.empty()) data["tokenizer"] = std::filesystem::absolute(tokenizer).string();
  return data;
}

}  // namespace

nlohmann::json ShardedTrainer::checkpoint_meta(int64_t steps_done) const {
  const Config& c = config_;
  // The library's meta (optimizer, precision, schedule), with the family's record of the model
  // and the training position, mesh and data beside it.
  return sharded_->checkpoint_meta(
      steps_done,
      {{"model", model_meta_json(c.model, *model_)},
       {"training",
        {{"seed", c.training.seed},
         {"global_batch", c.training.global_batch},
         {"seq_len", c.training.seq_len},
         {"max_steps", c.training.max_steps}}},
       {"mesh",
        {{"shard_degree", mesh_->shape().dp_shard},
         {"replicate_degree", mesh_->shape().dp_replicate},
         {"tp", mesh_->shape().tp},
         {"pp", mesh_->shape().pp}}},
       // The data order is a function of (seed, global sample index), the schedule of the
       // step and the initial weights of the seed: these positions are the whole RNG state.
       {"data", data_meta(c, steps_done)}});
}

std::string ShardedTrainer::save_checkpoint(int64_t steps_done) {
  if (config_.checkpoint.dir.empty()) fail_input("checkpoint.dir is empty: nowhere to save");
  TraceScope span("checkpoint save");
  SaveOptions options;
  options.keep = int(config_.checkpoint.keep);
  options.slow_ms_per_unit = slow_checkpoint_ms_;
  options.on_complete = on_checkpoint_complete_;
  // One copy per job: replica 0's shard group writes it, the other replicas wait for it.
  std::string path = checkpoint_path(config_.checkpoint.dir, steps_done);
  if (mesh_->writes_checkpoint())
    path = st::save_checkpoint(config_.checkpoint.dir, steps_done, checkpoint_meta(steps_done),
                               fsdp(), checkpoint_states(), options);
  if (mesh_->replica_group()) group_.barrier()->wait();
  return path;
}

ShardedTrainer::CheckpointStall ShardedTrainer::save_checkpoint_in_background(int64_t steps_done) {
  CheckpointStall stall;
  if (async_) {
    stall.wait_ms = async_->settle(config_.checkpoint.dir);
    if (async_->usable()) {
      stall.background = true;
      stall.path = checkpoint_path(config_.checkpoint.dir, steps_done);
      if (!mesh_->writes_checkpoint()) return stall;    // replica 0's shard group writes
      if (async_->failed_save_pending()) return stall;  // the job ends with it, reported next
      SaveOptions options;
      options.keep = int(config_.checkpoint.keep);
      options.slow_ms_per_unit = slow_checkpoint_ms_;
      options.on_complete = on_checkpoint_complete_;  // on the writer thread, once durable
      stall.save_ms = async_->start(config_.checkpoint.dir, steps_done, checkpoint_meta(steps_done),
                                    fsdp(), checkpoint_states(), options);
      return stall;
    }
  }
  Timer saved;
  stall.path = save_checkpoint(steps_done);
  stall.save_ms = saved.ms();
  return stall;
}

std::optional<BackgroundSave> ShardedTrainer::finished_background_save(bool wait,
                                                                       double* duration_s) {
  if (!async_) return std::nullopt;
  std::optional<BackgroundSave> done = async_->finished(wait);
  if (done && duration_s) *duration_s = async_->last_duration_s();
  return done;
}

void ShardedTrainer::settle_background_saves() {
  if (async_) async_->settle(config_.checkpoint.dir);
}

namespace {

// The training position in the caller's meta must be the one the manifest's step implies: a
// resumed run takes its optimizer step count and data position from it.
void check_position(const CheckpointInfo& info) {
  const std::string where = fmt::format("checkpoint '{}': meta", info.path);
  auto integer = [&](const char* section, const char* key, int64_t lo, int64_t hi) {
    const nlohmann::json& s = info.meta.value(section, nlohmann::json());
    if (!s.is_object() || !s.contains(key)) fail_input("{}.{}.{} is missing", where, section, key);
    return json_int(s[key], fmt::format("{}.{}.{}", where, section, key), lo, hi);
  };
  const int64_t step = info.step;
  const int64_t batch = integer("training", "global_batch", 1, int64_t(1) << 24);
  const int64_t next_sample = integer("data", "next_sample", 0, INT64_MAX);
  const std::pair<int64_t, const char*> positions[] = {
      {integer("optimizer", "steps_taken", 0, INT64_MAX), "optimizer.steps_taken"},
      {integer("schedule", "step", 0, INT64_MAX), "schedule.step"},
      {next_sample / batch, "data.next_sample / global_batch"}};
  for (const auto& [value, name] : positions)
    if (value != step)
      fail_input("{}.{} = {} disagrees with the manifest's step {}", where, name, value, step);
  if (next_sample % batch != 0)
    fail_input("{}.data.next_sample is not a whole number of training.global_batch = {}", where,
               batch);
}

}  // namespace

int64_t ShardedTrainer::load_checkpoint(const std::string& path) {
  if (async_) async_->wait_until_staged();
  CheckpointInfo info;
  run_agreed(group_, [&] { check_checkpoint(path, info); });
  sharded_->load(info);  // check_position: the optimizer's steps_taken is the step
  return info.step;
}

void check_resumable(const CheckpointInfo& info, const Config& config) {
  check_position(info);
  const std::string& path = info.path;
  // The family first, naming both (the sections of another family's model would differ in
  // every key).
  const std::string saved_family =
      model_family_of(info.meta.value("model", nlohmann::json::object()),
                      fmt::format("checkpoint '{}': meta.model", path));
  if (saved_family != config.model.family)
    fail_input("checkpoint '{}' holds a {} model, but this run has model.family = {}", path,
               saved_family, config.model.family);
  // The data order and the initial weights are functions of the seed, the data position of
  // the step and the batch: either changed, samples would repeat or be skipped in silence.
  const nlohmann::json now = {{"seed", config.training.seed},
                              {"global_batch", config.training.global_batch}};
  for (const char* key : {"seed", "global_batch"}) {
    const nlohmann::json& saved = info.meta.at("training");  // an object: check_position
    if (!saved.contains(key) || saved[key] != now[key])
      fail_input(
          "checkpoint '{}' was saved with training.{} = {}, this run has {}: resuming would "
          "repeat or skip training samples. Resume with training.{} = {}, or start a new run "
          "from its weights (shardtrain export --checkpoint {} --out W.safetensors, then "
          "checkpoint.resume=never training.init_from=W.safetensors)",
          path, key, saved.contains(key) ? saved[key].dump() : "nothing", now[key].dump(), key,
          saved.contains(key) ? saved[key].dump() : "its value", path);
  }
}

void ShardedTrainer::check_checkpoint(const std::string& path, CheckpointInfo& info) const {
  info = read_checkpoint_info(path);
  check_resumable(info, config_);
  // Then the architecture and optimizer saved, and the layout (the library's).
  sharded_->check_checkpoint(info, checkpoint_meta(info.step));
}

}  // namespace st
