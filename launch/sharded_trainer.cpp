#include "launch/sharded_trainer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/memory_stats.hpp"
#include "core/timer.hpp"
#include "core/trace.hpp"
#include "launch/evaluate.hpp"
#include "launch/phase_clock.hpp"
#include "sharding/safetensors.hpp"

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
  if (!config.training.init_from.empty()) load_safetensors(config.training.init_from, *fsdp_);
  for (const UnitLayout& u : fsdp_->units()) unit_names_.push_back(u.name);
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
  TraceScope step_span(fmt::format("step {}", step + 1), true);
  fsdp_->reset_comm();
  fsdp_->reset_memory_peak();
  fsdp_->begin_step(int(t.micro_batches));
  double loss_sum = 0;
  for (int64_t micro = 0; micro < t.micro_batches; ++micro) {
    fsdp_->begin_micro_batch(int(micro));
    const int64_t first = micro * rows_per_micro + group_.rank() * rows_per_rank;
    Batch batch = training_batch(data_.train(), uint64_t(t.seed), step, t.global_batch, first,
                                 first + rows_per_rank, t.seq_len);
    PhaseClock phases(*fsdp_, &unit_names_);
    loss_sum += model_->forward_backward(batch, grad_scale, phases);
    s.forward_ms += phases.forward_end_ms;
    s.backward_ms += phases.clock.ms() - phases.forward_end_ms;
  }
  Timer finish_clock;
  {
    TraceScope finish("finish backward (last reduce-scatters)");
    fsdp_->finish_backward();
  }
  s.backward_ms += finish_clock.ms();

  Timer opt_clock;
  TraceScope opt_span("optimizer (norm all-reduce, clip, AdamW)");
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
  s.collective_ms = comm.collective_ms;
  s.gathered_bytes = comm.gathered_bytes;
  s.scattered_bytes = comm.scattered_bytes;
  // Every rank's step time and peak RSS, each in its own slot: one sum all-reduce.
  const int W = group_.size();
  Tensor per_rank = Tensor::zeros("step_per_rank", {2 * W}, DType::f64);
  per_rank.data<double>()[group_.rank()] = s.step_ms;
  per_rank.data<double>()[W + group_.rank()] = peak_rss_mib();
  group_.all_reduce(per_rank)->wait();
  const double* v = per_rank.data<double>();
  s.rank_step_ms.assign(v, v + W);
  s.rank_peak_rss_mib.assign(v + W, v + 2 * W);
  s.slowest_step_ms = *std::max_element(v, v + W);
  s.max_peak_rss_mib = *std::max_element(v + W, v + 2 * W);
  return s;
}

double ShardedTrainer::evaluate(int64_t max_windows) {
  const int64_t T = config_.training.seq_len;
  const int64_t windows = std::min(max_windows, window_count(data_.val(), T));
  if (windows == 0) return NAN;
  const double sum = sharded_loss_sum(
      *model_, *fsdp_, windows, config_.training.global_batch,
      [&](int64_t first, int64_t rows) { return window_batch(data_.val(), first, rows, T); });
  return sum / double(windows * T);
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

namespace st {

nlohmann::json ShardedTrainer::checkpoint_meta(int64_t steps_done) const {
  const Config& c = config_;
  return {{"model",
           {{"n_layer", c.model.n_layer},
            {"n_embd", c.model.n_embd},
            {"n_head", c.model.n_head},
            {"block_size", c.model.block_size},
            {"vocab_size", c.model.vocab_size}}},
          {"optimizer", {{"name", c.optimizer.name}, {"steps_taken", optimizer_->steps_taken()}}},
          {"training",
           {{"seed", c.training.seed},
            {"global_batch", c.training.global_batch},
            {"seq_len", c.training.seq_len},
            {"max_steps", c.training.max_steps}}},
          {"precision", {{"param_dtype", dtype_name(c.precision.param_dtype)}}},
          // The data order is a function of (seed, global sample index), the schedule of the
          // step and the initial weights of the seed: these positions are the whole RNG state.
          {"data", {{"next_sample", steps_done * c.training.global_batch}}},
          {"schedule", {{"step", steps_done}}}};
}

std::vector<ShardedState> ShardedTrainer::checkpoint_states() {
  std::vector<ShardedState> states{{"master", {}}};
  for (const OptimParam& p : optimizer_->params()) states[0].spans.push_back(p.master);
  // Optimizer state comes as "<span name>.<state>" per span, spans in order.
  const auto& params = optimizer_->params();
  size_t k = 0;
  for (auto& [name, tensor] : optimizer_->state()) {
    while (k < params.size() && name.rfind(params[k].name + ".", 0) != 0) ++k;
    ST_CHECK(k < params.size(), "optimizer state '{}' matches no parameter span", name);
    const std::string kind = name.substr(params[k].name.size() + 1);
    auto it = std::find_if(states.begin(), states.end(),
                           [&](const ShardedState& s) { return s.name == kind; });
    if (it == states.end()) it = states.insert(states.end(), ShardedState{kind, {}});
    it->spans.push_back(tensor);
  }
  return states;
}

std::string ShardedTrainer::save_checkpoint(int64_t steps_done) {
  if (config_.checkpoint.dir.empty()) fail_input("checkpoint.dir is empty: nowhere to save");
  TraceScope span("checkpoint save");
  return st::save_checkpoint(config_.checkpoint.dir, steps_done, checkpoint_meta(steps_done),
                             *fsdp_, checkpoint_states(), int(config_.checkpoint.keep));
}

int64_t ShardedTrainer::load_checkpoint(const std::string& path) {
  const CheckpointInfo info = read_checkpoint_info(path);
  const nlohmann::json want = checkpoint_meta(info.step);
  // The architecture and the optimizer must be the ones saved; name the first difference.
  for (const char* section : {"model", "optimizer"})
    for (auto& [key, value] : want[section].items()) {
      if (key == "steps_taken") continue;
      const nlohmann::json& saved = info.meta.value(section, nlohmann::json::object());
      if (!saved.contains(key) || saved[key] != value)
        fail_input("checkpoint '{}' was saved with {}.{} = {}, this run has {}", path, section, key,
                   saved.contains(key) ? saved[key].dump() : "nothing", value.dump());
    }
  check_checkpoint_layout(info, *fsdp_);
  st::load_checkpoint(info, *fsdp_, checkpoint_states());
  optimizer_->set_steps_taken(info.meta["optimizer"].value("steps_taken", info.step));
  return info.step;
}

}  // namespace st
