#pragma once
// Your own model, sharded: one call, one policy struct (compare FSDP2's
// `fully_shard(module, mesh=..., mp_policy=...)`). The model is any st::Model (parameter specs
// grouped into units, forward/backward calling the unit hooks); this owns the FSDP runtime
// over its units, the optimizer on the FP32 master shards, and sharded checkpoints.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/step_observer.hpp"
#include "checkpoint/checkpoint.hpp"
#include "collectives/process_group.hpp"
#include "core/data/batch.hpp"
#include "core/model/model.hpp"
#include "optim/optimizer.hpp"
#include "parallel/device_mesh.hpp"
#include "parallel/fsdp/fsdp_runtime.hpp"
#include "parallel/pipeline/pipeline_runtime.hpp"
#include "parallel/tensor_parallel.hpp"
#include "parallel/tp_gradient_sums.hpp"

namespace st {

struct ShardPolicy {
  FsdpOptions fsdp;           // param_dtype (BF16 gathers), reshard_after_forward, prefetch, ...
  uint64_t seed = 0;          // initial weights: a function of (seed, parameter, element)
  OptimizerConfig optimizer;  // AdamW by default
  double grad_clip = 1.0;     // by the global gradient norm; 0: off
  // With a mesh of pp > 1: the schedule, virtual stages, split and boundary dtype; seq_len: the
  // sequence length the blocks' FLOPs are balanced at.
  PipelineOptions pipeline;
  int64_t seq_len = 0;
};

struct StepResult {
  double loss = 0;         // the global batch's mean loss (every rank gets the same)
  double grad_norm = 0;    // before clipping
  CommStats comm;          // this rank's collectives in this step
  FsdpMemory memory;       // this rank's shards, and its unsharded buffers' peak in this step
  PipelineStats pipeline;  // this rank's part of the pipeline's step (pp > 1)
};

// The training step lives here once: the library's users and the program's trainer
// (launch/sharded_trainer.hpp, which times and traces the phases through a StepObserver) run
// the same code. This is the library (api/, CMake target shardtrain::api): it includes only
// core/, collectives/, parallel/, checkpoint/ and optim/, so a library user links no command,
// toml++ or SimGrid.
class ShardedModel {
 public:
  // Collective. Materializes only this rank's shards of `model`'s parameters; FSDP over the
  // whole group.
  ShardedModel(Model& model, ProcessGroup& group, const ShardPolicy& policy);
  // The same over a 2-D mesh: sharded within its shard groups, gradient shards all-reduced
  // across its replicas (HSDP; DDP with shard groups of one).
  ShardedModel(Model& model, DeviceMesh& mesh, const ShardPolicy& policy);
  ~ShardedModel();

  // Collective. One optimizer step over this rank's micro-batches: forward and backward of each
  // (gradients reduce-scattered as units finish), clipping, the optimizer on the master
  // shards; `observer` sees each phase (api/step_observer.hpp). `loss_terms` counts the loss
  // terms (tokens, samples) of the whole global batch over every rank; the model's loss is a
  // sum, so gradients scaled by 1 / loss_terms add up to the gradient of the global mean.
  StepResult step(const std::vector<Batch>& micro_batches, int64_t loss_terms, float lr,
                  StepObserver* observer = nullptr);
  // step()'s two halves, for a caller with work of its own between them (the program's trainer
  // waits there for a background save's copy of what the update changes). Collective, each:
  // forward and backward of every micro-batch, the gradient shards final, the loss sum returned;
  // then the loss and norm agreed, clipping and the optimizer.
  double accumulate_gradients(const std::vector<Batch>& micro_batches, int64_t loss_terms,
                              StepObserver* observer = nullptr);
  StepResult apply_update(double loss_sum, int64_t loss_terms, float lr,
                          StepObserver* observer = nullptr);
  // Collective. The global mean loss of a forward over `batch` (this rank's part).
  double evaluate(const Batch& batch, int64_t loss_terms);
  // Collective. The sum of the token losses of windows [0, windows) (api/evaluate.hpp: chunks
  // of `chunk` windows split over the shard group; `batch(first, rows)` builds windows).
  double loss_sum_over_windows(int64_t windows, int64_t chunk,
                               const std::function<Batch(int64_t, int64_t)>& batch);

  // Collective. A sharded checkpoint at root/step-<step> (any world size can load it); keeps
  // the newest `keep`. Returns its path.
  std::string save(const std::string& root, int64_t step, int keep = 2);
  // Collective. Loads the newest complete checkpoint under `root` (checked against this model
  // and optimizer) and returns its step; 0 when there is none.
  int64_t resume(const std::string& root);

  // The pieces of save and resume, for a caller that records more (the program's trainer: its
  // training position, mesh and data) or saves in the background:
  // The manifest's meta after `step` steps: model (hyperparameters), optimizer (name, steps
  // taken), precision and schedule, with `extra`'s sections added (or in their place).
  nlohmann::json checkpoint_meta(int64_t step, const nlohmann::json& extra = {}) const;
  // Checks a read checkpoint against `want` (a checkpoint_meta) in its model and optimizer
  // sections, and its layout against this runtime's; an InputError naming the first
  // difference. Local: run it inside an agreement.
  void check_checkpoint(const CheckpointInfo& info, const nlohmann::json& want) const;
  // Collective. Loads a checked checkpoint's shards and the optimizer's step count.
  void load(const CheckpointInfo& info);

  // Collective. The whole FP32 master of parameter `index` (whole-parameter coordinates): its
  // shards gathered over the shard group and, where TP slices it, the slices over the TP group.
  // For tests and inspection: it allocates the whole parameter (twice, while it runs).
  Tensor whole_master(size_t index);

  // For what the step does not cover: loading weights, checkpoints' layouts, inspection.
  FsdpRuntime& runtime() { return *fsdp_; }
  const FsdpRuntime& runtime() const { return *fsdp_; }
  Optimizer& optimizer() { return *optimizer_; }
  const Optimizer& optimizer() const { return *optimizer_; }
  // The bytes the step all-reduces over TP once: the gradients the TP ranks compute parts of
  // (TpGradientSums; 0 without TP).
  int64_t tp_gradient_sum_bytes() const { return tp_grad_sums_->bytes(); }
  DeviceMesh& mesh() { return mesh_; }
  // The pipeline's executor (its stages, schedule and last step's time), nullptr for pp = 1.
  const PipelineRuntime* pipeline() const { return pipeline_.get(); }

 private:
  ShardedModel(Model& model, std::unique_ptr<DeviceMesh> own_mesh, DeviceMesh* mesh,
               const ShardPolicy& policy);
  double forward_backward(int micro, const Batch& batch, int64_t loss_terms, UnitHooks& hooks);
  // accumulate_gradients' loop under pipeline parallelism: the stages' units gathered once and
  // kept, the schedule run, each unit's gradient reduced once; the root unit (on the first and
  // the last stage) then gets the sum of both stages' gradients.
  double pipelined_gradients(const std::vector<Batch>& micro_batches, int64_t loss_terms);
  void sum_root_gradient();
  // whole_master on a stage that holds the parameter (or without pipeline parallelism).
  Tensor gathered_master(size_t index);
  // A forward-only loss over the pipeline (the last stage's; 0 elsewhere).
  double pipelined_loss(const Batch& batch);
  // The global loss and gradient norm (one all-reduce without replicas), clipping, the
  // optimizer step. `loss_sum` is this rank's, over its micro-batches.
  StepResult update(double loss_sum, int64_t loss_terms, float lr);
  // What this rank adds to a sum of losses over the world: every TP rank of a data-parallel
  // place computed the same loss, and the first counts it.
  double loss_share(double loss_sum) const;

  Model& model_;
  std::unique_ptr<DeviceMesh> own_mesh_;  // the 1-D mesh of the group constructor
  DeviceMesh& mesh_;
  ProcessGroup& group_;  // the mesh's world: the loss, checkpoints' agreement
  ShardPolicy policy_;
  std::unique_ptr<GroupTensorParallel> tensor_parallel_;  // the model's TP collectives (tp > 1)
  std::unique_ptr<PipelineRuntime> pipeline_;
  std::unique_ptr<FsdpRuntime> fsdp_;
  std::unique_ptr<TpGradientSums> tp_grad_sums_;  // summed over TP once a step
  std::unique_ptr<Optimizer> optimizer_;
};

// The FSDP2-style spelling of the constructor.
std::unique_ptr<ShardedModel> fully_shard(Model& model, ProcessGroup& group,
                                          const ShardPolicy& policy = {});

// What a checkpoint of an optimizer over FSDP spans holds: "master", then one state per kind
// of optimizer moment ("exp_avg", ...), spans in FsdpRuntime::spans() order.
std::vector<ShardedState> optimizer_checkpoint_states(Optimizer& optimizer);
// Checks that `saved` (a checkpoint's meta) has the values `want` has in each of `sections`
// (ignoring optimizer.steps_taken); an InputError naming the first difference otherwise.
void check_saved_sections(const std::string& path, const nlohmann::json& saved,
                          const nlohmann::json& want, const std::vector<std::string>& sections);

}  // namespace st
