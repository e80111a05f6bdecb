#pragma once
// Your own model, sharded: one call, one policy struct (compare FSDP2's
// `fully_shard(module, mesh=..., mp_policy=...)`). The model is any st::Model (parameter specs
// grouped into units, forward/backward calling the unit hooks); this owns the FSDP runtime
// over its units, the optimizer on the FP32 master shards, and sharded checkpoints.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectives/process_group.hpp"
#include "core/data/batch.hpp"
#include "core/model/model.hpp"
#include "optim/optimizer.hpp"
#include "sharding/checkpoint.hpp"
#include "sharding/fsdp_runtime.hpp"

namespace st {

struct ShardPolicy {
  FsdpOptions fsdp;           // param_dtype (BF16 gathers), reshard_after_forward, prefetch, ...
  uint64_t seed = 0;          // initial weights: a function of (seed, parameter, element)
  OptimizerConfig optimizer;  // AdamW by default
  double grad_clip = 1.0;     // by the global gradient norm; 0: off
};

struct StepResult {
  double loss = 0;       // the global batch's mean loss (every rank gets the same)
  double grad_norm = 0;  // before clipping
};

class ShardedModel {
 public:
  // Collective. Materializes only this rank's shards of `model`'s parameters.
  ShardedModel(Model& model, ProcessGroup& group, const ShardPolicy& policy);
  ~ShardedModel();

  // Collective. One optimizer step over this rank's micro-batches: forward and backward of each
  // (gradients reduce-scattered as units finish), clipping, the optimizer on the master
  // shards. `loss_terms` counts the loss terms (tokens, samples) of the whole global batch over
  // every rank; the model's loss is a sum, so gradients scaled by 1 / loss_terms add up to the
  // gradient of the global mean.
  StepResult step(const std::vector<Batch>& micro_batches, int64_t loss_terms, float lr);
  // Collective. The global mean loss of a forward over `batch` (this rank's part).
  double evaluate(const Batch& batch, int64_t loss_terms);

  // Collective. A sharded checkpoint at root/step-<step> (any world size can load it); keeps
  // the newest `keep`. Returns its path.
  std::string save(const std::string& root, int64_t step, int keep = 2);
  // Collective. Loads the newest complete checkpoint under `root` (checked against this model
  // and optimizer) and returns its step; 0 when there is none.
  int64_t resume(const std::string& root);

  FsdpRuntime& runtime() { return *fsdp_; }
  Optimizer& optimizer() { return *optimizer_; }

 private:
  Model& model_;
  ProcessGroup& group_;
  ShardPolicy policy_;
  std::unique_ptr<FsdpRuntime> fsdp_;
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
