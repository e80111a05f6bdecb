#include "launch/training_cadence.hpp"

#include "core/error.hpp"
#include "core/trace.hpp"

namespace st {

int64_t periodic_validation_windows(const Config& config) {
  const int64_t tokens = config.training.eval_tokens, T = config.training.seq_len;
  if (tokens == 0) return kFinalValidationWindows;
  return tokens / T + (tokens % T != 0);
}

void check_validation_split(const Config& config, const Dataset& data) {
  const int64_t T = config.training.seq_len;
  if (config.training.eval_every == 0 || window_count(data.val(), T) > 0) return;
  fail_input(
      "training.eval_every = {}: the validation split of {} holds {} tokens, fewer than one window "
      "of training.seq_len + 1 = {}; give a larger one (data.val_fraction, data.val_tokens) or set "
      "training.eval_every = 0",
      config.training.eval_every, data.source(), data.val().size(), T + 1);
}

bool validation_due(const Config& config, int64_t steps_done) {
  const int64_t every = config.training.eval_every;
  return every > 0 && steps_done > 0 && steps_done % every == 0;
}

std::optional<ValidationResult> validate_if_due(ShardedTrainer& trainer, const Config& config,
                                                int64_t steps_done) {
  if (!validation_due(config, steps_done)) return std::nullopt;
  TraceScope span("validation");
  const int64_t windows = periodic_validation_windows(config);
  ValidationResult v;
  v.after_step = steps_done;
  v.loss = trainer.evaluate(windows);
  v.tokens = trainer.validation_windows(windows) * config.training.seq_len;
  return v;
}

nlohmann::json validation_record(const ValidationResult& v) {
  return {{"after_step", v.after_step}, {"val_loss", v.loss}, {"val_tokens", v.tokens}};
}

bool step_line_due(const Config& config, int64_t steps_done, bool validated) {
  return validated || steps_done % config.metrics.log_every == 0 ||
         steps_done >= config.training.max_steps;
}

}  // namespace st
