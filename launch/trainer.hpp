#pragma once
// The single-process training loop: the unsharded reference that sharded runs must match.
#include <memory>
#include <string>
#include <vector>

#include "core/data/dataset.hpp"
#include "core/model/gpt.hpp"
#include "launch/config.hpp"
#include "launch/local_params.hpp"
#include "optim/optimizer.hpp"
#include "optim/schedule.hpp"

namespace st {

struct StepStats {
  int64_t step = 0;
  double loss = 0;  // mean over the tokens of the global batch
  float lr = 0;
  double grad_norm = 0;  // before clipping
  int64_t tokens = 0;
  double step_ms = 0, forward_ms = 0, backward_ms = 0, optimizer_ms = 0;
  // Sharded runs only.
  double exposed_comm_ms = 0;  // compute blocked on collectives
  double collective_ms = 0;    // all-gathers and reduce-scatters running (comm thread)
  double slowest_step_ms = 0;  // the slowest rank's step time
  std::vector<double> rank_step_ms, rank_peak_rss_mib;  // every rank's, by rank
  double max_peak_rss_mib = 0;                          // the largest peak RSS of any rank
  int64_t gathered_bytes = 0, scattered_bytes = 0;
};

class LocalTrainer {
 public:
  LocalTrainer(const Config& config, const TextDataset& data);

  // Runs training step `step` (0-based) on its global batch.
  StepStats step(int64_t step);
  // Mean loss over up to `max_windows` consecutive validation windows.
  double evaluate(int64_t max_windows);

  GPT& model() { return *model_; }
  LocalParams& params() { return *params_; }
  Optimizer& optimizer() { return *optimizer_; }

 private:
  const Config& config_;
  const TextDataset& data_;
  std::unique_ptr<GPT> model_;
  std::unique_ptr<LocalParams> params_;
  std::unique_ptr<Optimizer> optimizer_;
  LrSchedule schedule_;
};

}  // namespace st
