#pragma once
// The single-process training loop: the unsharded reference that sharded runs must match.
#include <memory>
#include <string>
#include <vector>

#include "collectives/fake_process_group.hpp"
#include "core/data/dataset.hpp"
#include "launch/config.hpp"
#include "launch/sharded_trainer.hpp"
#include "models/gpt2/gpt.hpp"
#include "optim/optimizer.hpp"
#include "optim/schedule.hpp"
#include "tests/support/local_params.hpp"

namespace st {

class LocalTrainer {
 public:
  LocalTrainer(const Config& config, const Dataset& data);

  // Runs training step `step` (0-based) on its global batch.
  StepStats step(int64_t step);
  // Mean loss over up to `max_windows` consecutive validation windows.
  double evaluate(int64_t max_windows);

  Model& model() { return *model_; }
  LocalParams& params() { return *params_; }

 private:
  const Config& config_;
  const Dataset& data_;
  std::unique_ptr<ProcessGroup> self_;  // a group of one: clipping's all-reduce is the identity
  std::unique_ptr<Model> model_;
  std::unique_ptr<LocalParams> params_;
  std::unique_ptr<Optimizer> optimizer_;
  LrSchedule schedule_;
};

}  // namespace st
