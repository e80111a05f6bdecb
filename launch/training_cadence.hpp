#pragma once
// What the training loop does every so many steps besides the step itself: a validation
// (training.eval_every, over training.eval_tokens) and the printed step line (metrics.log_every).
// metrics.file keeps every step whatever the cadence.
#include <cstdint>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/data/dataset.hpp"
#include "launch/config.hpp"
#include "launch/sharded_trainer.hpp"

namespace st {

// A validation loss and where it was taken.
struct ValidationResult {
  int64_t after_step = 0;  // steps done when it was taken (1-based, as the step line counts)
  double loss = 0;
  int64_t tokens = 0;  // the validation tokens scored
};

// The windows of training.seq_len tokens a periodic validation scores at most:
// training.eval_tokens rounded up to whole windows, or (0) the final validation's.
int64_t periodic_validation_windows(const Config& config);

// training.eval_every > 0 needs a validation split of at least one window: an InputError
// naming the keys otherwise, at start-up rather than at the first validation.
void check_validation_split(const Config& config, const Dataset& data);

// Whether training.eval_every asks for a validation after `steps_done` steps.
bool validation_due(const Config& config, int64_t steps_done);

// Collective (every rank calls it after every step): the validation due after `steps_done`
// steps, through the final validation's code path (ShardedTrainer::evaluate); none when not due.
std::optional<ValidationResult> validate_if_due(ShardedTrainer& trainer, const Config& config,
                                                int64_t steps_done);

// A validation's record in metrics.file (and on stdout under --json), the final validation's
// keys and the tokens scored: {"after_step": N, "val_loss": x, "val_tokens": T}.
nlohmann::json validation_record(const ValidationResult& v);

// Whether the step line of step `steps_done` (1-based) is printed: every metrics.log_every-th
// step, the last one, and one that carries a validation.
bool step_line_due(const Config& config, int64_t steps_done, bool validated);

}  // namespace st
