#include "tests/support/local_trainer.hpp"

#include <cmath>

#include "api/phase_clock.hpp"
#include "core/timer.hpp"
#include "launch/model_factory.hpp"
#include "optim/clip.hpp"

namespace st {

LocalTrainer::LocalTrainer(const Config& config, const Dataset& data)
    : config_(config), data_(data), self_(std::move(FakeProcessGroup::create(1).front())) {
  model_ = make_model(config);
  params_ = std::make_unique<LocalParams>(*model_, uint64_t(config.training.seed));
  optimizer_ = make_optimizer(params_->optim_params(), config.optimizer);
  schedule_ = lr_schedule(config);
}

StepStats LocalTrainer::step(int64_t step) {
  StepStats s;
  s.step = step;
  s.lr = schedule_.at(step);
  const auto& t = config_.training;
  const int64_t rows_per_micro = t.global_batch / t.micro_batches;
  s.tokens = t.global_batch * t.seq_len;
  const float grad_scale = 1.0f / float(s.tokens);

  Timer step_clock;
  params_->cast_for_compute();
  params_->zero_grads();
  double loss_sum = 0;
  for (int64_t micro = 0; micro < t.micro_batches; ++micro) {
    Batch batch = training_batch(data_.train(), uint64_t(t.seed), step, t.global_batch,
                                 micro * rows_per_micro, (micro + 1) * rows_per_micro, t.seq_len);
    UnitHooks none;
    PhaseClock phases(none);
    loss_sum += model_->forward_backward(batch, grad_scale, phases);
    s.forward_ms += phases.forward_end_ms;
    s.backward_ms += phases.clock.ms() - phases.forward_end_ms;
  }
  Timer opt_clock;
  s.grad_norm = clip_grad_norm(optimizer_->params(), t.grad_clip, *self_, {}, "reference step");
  optimizer_->step(s.lr);
  s.optimizer_ms = opt_clock.ms();
  s.step_ms = step_clock.ms();
  s.loss = loss_sum / double(s.tokens);
  if (!std::isfinite(s.loss)) fail("reference step {}: the loss ({}) is not finite", step, s.loss);
  return s;
}

double LocalTrainer::evaluate(int64_t max_windows) {
  const int64_t T = config_.training.seq_len;
  const int64_t windows = std::min(max_windows, window_count(data_.val(), T));
  if (windows == 0) return NAN;
  params_->cast_for_compute();
  UnitHooks none;
  double sum = 0;
  const int64_t rows = config_.training.global_batch;
  for (int64_t first = 0; first < windows; first += rows) {
    Batch batch = window_batch(data_.val(), first, std::min(rows, windows - first), T);
    sum += model_->forward_loss(batch, none);
  }
  return sum / double(windows * T);
}

}  // namespace st
