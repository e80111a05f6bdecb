#pragma once
// The training loop over the FSDP runtime: every rank takes its rows of each global batch,
// gradients are reduce-scattered into FP32 shards, AdamW updates this rank's masters only.
#include <functional>
#include <memory>
#include <optional>

#include "api/async_checkpoint.hpp"
#include "api/sharded_model.hpp"
#include "checkpoint/checkpoint.hpp"
#include "collectives/process_group.hpp"
#include "core/data/dataset.hpp"
#include "core/model/model.hpp"
#include "core/op_profile.hpp"
#include "launch/config.hpp"
#include "optim/optimizer.hpp"
#include "optim/schedule.hpp"
#include "parallel/device_mesh.hpp"
#include "parallel/fsdp/fsdp_runtime.hpp"
#include "parallel/fsdp/memory_budget.hpp"
#include "parallel/fsdp/traffic.hpp"

namespace st {

// What one training step did and cost, as every rank agrees after it.
struct StepStats {
  int64_t step = 0;
  double loss = 0;  // mean over the tokens of the global batch
  float lr = 0;
  double grad_norm = 0;  // before clipping
  int64_t tokens = 0;
  double step_ms = 0, forward_ms = 0, backward_ms = 0, optimizer_ms = 0;
  OpTimes op_ms{};  // this rank's step time by kind of work (core/op_profile.hpp)
  // Sharded runs only.
  CommStats comm;              // this rank's collectives: exposed and running time, bytes
  double slowest_step_ms = 0;  // the slowest rank's step time
  std::vector<double> rank_step_ms, rank_peak_rss_mib;  // every rank's, by rank
  double max_peak_rss_mib = 0;                          // the largest peak RSS of any rank
  double checkpoint_stage_wait_ms = 0;  // the update waited for a background save's copy
  FsdpMemory memory;                    // this rank's shards and unsharded peak in this step
  // Pipeline parallelism (pp > 1): this rank's part, and the pipeline's bubble (the share of
  // the ranks' pipeline time they did not compute: 1 - mean compute / the longest run).
  PipelineStats pipeline;
  double pp_bubble = 0;
};

FsdpOptions fsdp_options(const Config& config);
// [parallel]'s pipeline keys (the schedule, virtual stages and split; BF16 boundaries under
// param_dtype = bf16).
PipelineOptions pipeline_options(const Config& config);
// `units` as pipeline rank `rank` of `ranks` holds them under `split`: the other stages' units
// with no size (for its budget and traffic).
std::vector<UnitLayout> held_layouts(const std::vector<UnitLayout>& units, const Model& model,
                                     const std::vector<StageRange>& split, int ranks, int rank);
// One micro-batch's residual-stream activation of a data-parallel place, FP32 [rows, seq_len,
// n_embd]: what a TP all-reduce carries (a row-parallel block's partial sums).
double tp_activation_bytes(const Config& config, const MeshShape& mesh);
// Each rank's tensor-parallel collective payload per step (0 for tp = 1), in whole buffers as
// CommStats counts them: every collective `model`'s work lists for a micro-batch (Model::work,
// which the simulator replays; TensorParallel.WorkListsTheCollectivesTheModelRuns holds it to
// what the model runs), times the micro-batches.
// With `stage`, the collectives of that pipeline stage's blocks (and the root's parts it holds).
double tp_collective_bytes(const Model& model, const Config& config, const MeshShape& mesh,
                           const StageBlocks* stage = nullptr);
// The learning-rate schedule of `config` (optimizer.schedule and its keys, training.max_steps).
LrSchedule lr_schedule(const Config& config);

// The windows of training.seq_len tokens the validation after the last step scores at most.
inline constexpr int64_t kFinalValidationWindows = 64;

// The per-rank memory budget of `config` on `world_size` ranks for `units` (laid out over the
// shard group): what the trainer prints and checks at start-up, and what `simulate` reports.
// With pipeline stages it is the most loaded pipeline rank's; `per_pipeline_rank` (if given)
// receives each pipeline rank's, in order.
MemoryBudget config_memory_budget(const Config& config, const Model& model,
                                  const std::vector<UnitLayout>& units, int states_per_element,
                                  int world_size,
                                  std::vector<MemoryBudget>* per_pipeline_rank = nullptr);
// An InputError (the budget's parts and what to reduce) when a rank's budget for `config` on
// `group` exceeds what the machine has for it; called before anything is allocated or
// measured (the matmul peak at the model's shapes took 20 s for a model that cannot fit).
void check_memory_fits(const Config& config, const Model& model, const ProcessGroup& group);

class ShardedTrainer {
 public:
  // `config` has been validated (load_config) and `model` is make_model(config): parameter
  // specs only, nothing materialized. Checks what needs the world (validate_for_world) and
  // materializes this rank's shards of the parameters, nothing more.
  ShardedTrainer(const Config& config, const Dataset& data, ProcessGroup& group,
                 std::unique_ptr<Model> model);

  // Training step `step` (0-based); a collective: every rank calls it.
  StepStats step(int64_t step);
  // Mean loss over up to `max_windows` validation windows, split over the ranks.
  double evaluate(int64_t max_windows);
  // The windows evaluate(max_windows) scores: the first ones of the validation split.
  int64_t validation_windows(int64_t max_windows) const;

  Model& model() { return *model_; }
  FsdpRuntime& fsdp() { return sharded_->runtime(); }
  const FsdpRuntime& fsdp() const { return sharded_->runtime(); }
  DeviceMesh& mesh() { return *mesh_; }
  const ShardedModel& sharded() const { return *sharded_; }
  // Collective: ShardedModel::whole_master.
  Tensor whole_master(size_t index) { return sharded_->whole_master(index); }
  // The analytical per-rank budget (computed once, at start-up).
  MemoryBudget budget() const;
  // The bytes a step moves, per rank and over each link class (parallel/fsdp/traffic.hpp).
  Traffic traffic() const;
  Traffic pipeline_traffic() const;
  nlohmann::json checkpoint_meta(int64_t steps_done) const;
  std::vector<ShardedState> checkpoint_states() {
    return optimizer_checkpoint_states(sharded_->optimizer());
  }
  int64_t optimizer_state_bytes() const;

  // Collective. Saves the state after `steps_done` steps under checkpoint.dir; returns the path.
  std::string save_checkpoint(int64_t steps_done);
  // What a save cost the training loop: waiting for the previous background save, and the
  // staging copy (or the whole save, when it was synchronous).
  struct CheckpointStall {
    double wait_ms = 0, save_ms = 0;
    bool background = false;  // handed to the writer thread (false: saved synchronously)
    std::string path;
  };
  // Collective. checkpoint.async: hands the state after `steps_done` steps to the background
  // writer (after the save in flight, if any, has finished); synchronous when background saves
  // are off or were given up earlier in this job.
  CheckpointStall save_checkpoint_in_background(int64_t steps_done);
  // The background save that finished since the last call, once; `wait`: wait for the one in
  // flight. Its seconds from hand-over to the end in *duration_s.
  std::optional<BackgroundSave> finished_background_save(bool wait, double* duration_s);
  // Collective. Waits for the background save in flight and agrees on what was given up (its
  // temporaries go); at the end of training.
  void settle_background_saves();
  // The CPU seconds the background writer has used in this job (0 without one).
  double background_writer_cpu_seconds() const { return async_ ? async_->writer_cpu_seconds() : 0; }
  // Why checkpoint.async runs synchronously here ("" when it does not).
  const std::string& background_saves_off() const { return background_off_; }
  // A test hook: checkpoint writes sleep `ms` after each unit, so a test can kill a save.
  void slow_checkpoint_writes(int ms) { slow_checkpoint_ms_ = ms; }
  // Called on the rank that publishes a checkpoint the moment it is complete on disk (before
  // save_checkpoint returns), with its path; for a background save, on its writer thread.
  void on_checkpoint_complete(std::function<void(const std::string&)> f) {
    on_checkpoint_complete_ = std::move(f);
  }
  // Collective. Loads a checkpoint saved at any world size; returns the steps it had done.
  // A checkpoint of another model or optimizer is an InputError naming the differing key.
  int64_t load_checkpoint(const std::string& path);

 private:
  // Reads `path`'s manifest into `info` and checks it against this run: the training position,
  // the model and optimizer it was saved with, the layout. Local: run inside an agreement.
  void check_checkpoint(const std::string& path, CheckpointInfo& info) const;
  // This rank's rows of micro-batch `micro` of step `step`'s global batch.
  Batch rows_of(int64_t step, int64_t micro) const;
  // The step's communication stats and memory, and every rank's step time and peak RSS.
  void agree_on_stats(const StepResult& r, StepStats& s);
  MemoryBudget budget_for(const std::vector<UnitLayout>& units, int states_per_element) const;
  // The budget of this node's ranks against the machine's memory (and ulimit -v), before any
  // allocation: an InputError naming the budget, what is available and the keys behind it.

  const Config& config_;
  const Dataset& data_;
  ProcessGroup& group_;                         // the world: data rows, loss, stats
  std::unique_ptr<ProcessGroup> placed_world_;  // the world under sharding.ranks_per_node
  std::unique_ptr<DeviceMesh> mesh_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<ShardedModel> sharded_;  // the FSDP runtime, the optimizer and the step
  LrSchedule schedule_;
  std::vector<std::string> unit_names_;
  int slow_checkpoint_ms_ = 0;
  std::function<void(const std::string&)> on_checkpoint_complete_;
  std::unique_ptr<AsyncCheckpointer> async_;  // checkpoint.async (MPI_THREAD_MULTIPLE)
  std::string background_off_;
  MemoryBudget budget_;
};

// What a resume needs of a checkpoint that the config alone can check, before any work: its
// training position is consistent, and it holds this run's model family, seed and global
// batch. An InputError naming the checkpoint, the key and the value that would resume.
void check_resumable(const CheckpointInfo& info, const Config& config);

}  // namespace st
