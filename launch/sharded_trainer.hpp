#pragma once
// The training loop over the FSDP runtime: every rank takes its rows of each global batch,
// gradients are reduce-scattered into FP32 shards, AdamW updates this rank's masters only.
#include <memory>

#include "collectives/process_group.hpp"
#include "core/data/dataset.hpp"
#include "core/model/gpt.hpp"
#include "launch/config.hpp"
#include "launch/trainer.hpp"
#include "optim/optimizer.hpp"
#include "optim/schedule.hpp"
#include "sharding/checkpoint.hpp"
#include "sharding/fsdp_runtime.hpp"
#include "sharding/memory_budget.hpp"

namespace st {

FsdpOptions fsdp_options(const Config& config);

class ShardedTrainer {
 public:
  // Builds the model on the meta device (shapes only) and materializes this rank's shards.
  ShardedTrainer(const Config& config, const TextDataset& data, ProcessGroup& group);

  // Training step `step` (0-based); a collective: every rank calls it.
  StepStats step(int64_t step);
  // Mean loss over up to `max_windows` validation windows, split over the ranks.
  double evaluate(int64_t max_windows);

  GPT& model() { return *model_; }
  FsdpRuntime& fsdp() { return *fsdp_; }
  Optimizer& optimizer() { return *optimizer_; }
  // The analytical per-rank budget and the bytes of optimizer state actually held.
  MemoryBudget budget() const;
  nlohmann::json checkpoint_meta(int64_t steps_done) const;
  std::vector<ShardedState> checkpoint_states();
  int64_t optimizer_state_bytes() const;

  // Collective. Saves the state after `steps_done` steps under checkpoint.dir; returns the path.
  std::string save_checkpoint(int64_t steps_done);
  // Collective. Loads a checkpoint saved at any world size; returns the steps it had done.
  // A checkpoint of another model or optimizer is an InputError naming the differing key.
  int64_t load_checkpoint(const std::string& path);

 private:
  const Config& config_;
  const TextDataset& data_;
  ProcessGroup& group_;
  std::unique_ptr<GPT> model_;
  std::unique_ptr<FsdpRuntime> fsdp_;
  std::unique_ptr<Optimizer> optimizer_;
  LrSchedule schedule_;
  std::vector<std::string> unit_names_;
};

}  // namespace st
