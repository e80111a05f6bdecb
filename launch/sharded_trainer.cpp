#include "launch/sharded_trainer.hpp"

#include <cmath>

#include "core/memory_stats.hpp"
#include "core/timer.hpp"
#include "launch/phase_clock.hpp"

namespace st {

FsdpOptions fsdp_options(const Config& config) {
  FsdpOptions o;
  o.param_dtype = config.precision.param_dtype;
  o.reshard_after_forward = config.sharding.reshard_after_forward;
  o.prefetch = int(config.sharding.prefetch);
  o.accumulation = parse_accumulation(config.sharding.accumulation, "sharding.accumulation");
  o.collective.algorithm =
      parse_algorithm(config.sharding.collective_algorithm, "sharding.collective_algorithm");
  return o;
}

ShardedTrainer::ShardedTrainer(const Config& config, const TextDataset& data, ProcessGroup& group)
    : config_(config), data_(data), group_(group) {
  validate_config(config, group.size());
  model_ = std::make_unique<GPT>(config.model, config.precision.param_dtype);
  fsdp_ = std::make_unique<FsdpRuntime>(*model_, group, fsdp_options(config),
                                        uint64_t(config.training.seed));
  std::vector<OptimParam> params;
  for (ShardSpan& s : fsdp_->spans())
    params.push_back(make_optim_param(s.name, s.master, s.grad, s.weight_decay));
  optimizer_ = make_optimizer(std::move(params), config.optimizer);
  schedule_ = {float(config.schedule.lr), float(config.schedule.min_lr),
               config.schedule.warmup_steps, config.training.max_steps};
}

StepStats ShardedTrainer::step(int64_t step) {
  StepStats s;
  s.step = step;
  s.lr = schedule_.at(step);
  const auto& t = config_.training;
  const int64_t rows_per_micro = t.global_batch / t.micro_batches;
  const int64_t rows_per_rank = rows_per_micro / group_.size();
  s.tokens = t.global_batch * t.seq_len;
  // Every token of the global step weighs the same, whichever rank holds it.
  const float grad_scale = 1.0f / float(s.tokens);

  Timer step_clock;
  fsdp_->reset_comm();
  fsdp_->begin_step(int(t.micro_batches));
  double loss_sum = 0;
  for (int64_t micro = 0; micro < t.micro_batches; ++micro) {
    fsdp_->begin_micro_batch(int(micro));
    const int64_t first = micro * rows_per_micro + group_.rank() * rows_per_rank;
    Batch batch = training_batch(data_.train(), uint64_t(t.seed), step, t.global_batch, first,
                                 first + rows_per_rank, t.seq_len);
    PhaseClock phases(*fsdp_);
    loss_sum += model_->forward_backward(batch, grad_scale, phases);
    s.forward_ms += phases.forward_end_ms;
    s.backward_ms += phases.clock.ms() - phases.forward_end_ms;
  }
  Timer finish_clock;
  fsdp_->finish_backward();
  s.backward_ms += finish_clock.ms();

  Timer opt_clock;
  const auto& params = optimizer_->params();
  // One all-reduce carries the loss and this rank's part of the squared gradient norm.
  Tensor sums = Tensor::empty("step_sums", {2}, DType::f64);
  sums.data<double>()[0] = loss_sum;
  sums.data<double>()[1] = grad_sum_of_squares(params);
  group_.all_reduce(sums)->wait();
  s.loss = sums.data<double>()[0] / double(s.tokens);
  s.grad_norm = std::sqrt(sums.data<double>()[1]);
  if (!std::isfinite(s.loss) || !std::isfinite(s.grad_norm))
    fail(
        "step {}: the loss ({}) or gradient norm ({}) is not finite; lower optimizer.lr or "
        "check the data",
        step, s.loss, s.grad_norm);
  const float factor = clip_factor(s.grad_norm, t.grad_clip);
  if (factor != 1.0f) scale_grads(params, factor);
  optimizer_->step(s.lr);
  s.optimizer_ms = opt_clock.ms();
  s.step_ms = step_clock.ms();

  const CommStats& comm = fsdp_->comm();
  s.exposed_comm_ms = comm.exposed_ms;
  s.gathered_bytes = comm.gathered_bytes;
  s.scattered_bytes = comm.scattered_bytes;
  Tensor slowest = Tensor::empty("step_max", {2}, DType::f64);
  slowest.data<double>()[0] = s.step_ms;
  slowest.data<double>()[1] = peak_rss_mib();
  group_.all_reduce(slowest, {.op = ReduceOp::max})->wait();
  s.slowest_step_ms = slowest.data<double>()[0];
  s.max_peak_rss_mib = slowest.data<double>()[1];
  return s;
}

double ShardedTrainer::evaluate(int64_t max_windows) {
  const int64_t T = config_.training.seq_len;
  const int64_t windows = std::min(max_windows, window_count(data_.val(), T));
  if (windows == 0) return NAN;
  const int world = group_.size(), rank = group_.rank();
  // Chunks of up to global_batch windows, each split over the ranks. Every rank runs the same
  // number of forwards (they gather parameters together); a rank without rows in a chunk runs
  // one dummy row and counts nothing.
  const int64_t chunk = config_.training.global_batch;
  double sum = 0;
  for (int64_t start = 0; start < windows; start += chunk) {
    const int64_t n = std::min(chunk, windows - start);
    const int64_t per_rank = (n + world - 1) / world;
    const int64_t lo = std::min(n, rank * per_rank), hi = std::min(n, lo + per_rank);
    const bool dummy = hi == lo;
    Batch batch = window_batch(data_.val(), dummy ? 0 : start + lo, dummy ? 1 : hi - lo, T);
    const double loss = model_->forward_loss(batch, *fsdp_);
    if (!dummy) sum += loss;
  }
  fsdp_->reshard_all();
  Tensor total = Tensor::empty("eval_sum", {1}, DType::f64);
  total.data<double>()[0] = sum;
  group_.all_reduce(total)->wait();
  return total.data<double>()[0] / double(windows * T);
}

MemoryBudget ShardedTrainer::budget() const {
  const auto& t = config_.training;
  const int64_t rows = t.global_batch / t.micro_batches / group_.size();
  return memory_budget(
      {&fsdp_->units(), config_.precision.param_dtype, int(config_.sharding.prefetch),
       config_.optimizer.name == "sgd" ? 1 : 2,
       fsdp_->options().accumulation == Accumulation::reduce_last && t.micro_batches > 1,
       config_.sharding.reshard_after_forward, model_->activation_bytes(rows, t.seq_len)});
}

int64_t ShardedTrainer::optimizer_state_bytes() const {
  int64_t bytes = 0;
  for (auto& [name, tensor] : optimizer_->state()) bytes += int64_t(tensor.nbytes());
  return bytes;
}

}  // namespace st
