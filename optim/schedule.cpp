#include "optim/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace st {

const char* schedule_kind_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::cosine:
      return "cosine";
    case ScheduleKind::linear:
      return "linear";
    case ScheduleKind::constant:
      return "constant";
    case ScheduleKind::wsd:
      return "wsd";
  }
  return "?";
}

const char* decay_shape_name(DecayShape shape) {
  switch (shape) {
    case DecayShape::linear:
      return "linear";
    case DecayShape::cosine:
      return "cosine";
    case DecayShape::sqrt:
      return "sqrt";
  }
  return "?";
}

namespace {

// The fraction of (lr - min_lr) left at `progress` (0 at the decay's start, 1 at its end).
double remaining(DecayShape shape, double progress) {
  switch (shape) {
    case DecayShape::linear:
      return 1.0 - progress;
    case DecayShape::cosine:
      return 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
    case DecayShape::sqrt:
      return 1.0 - std::sqrt(progress);
  }
  return 1.0;
}

}  // namespace

int64_t LrSchedule::decay_start() const {
  switch (kind) {
    case ScheduleKind::constant:
      return max_steps;
    case ScheduleKind::wsd: {
      // At least one step of decay (which then goes straight to min_lr).
      const int64_t decay = std::max<int64_t>(1, std::llround(decay_fraction * double(max_steps)));
      return std::max(warmup_steps, max_steps - decay);
    }
    default:
      return warmup_steps;
  }
}

float LrSchedule::at(int64_t step) const {
  if (step < warmup_steps) return lr * float(step + 1) / float(warmup_steps);
  const int64_t start = decay_start();
  const int64_t decay_steps = max_steps - start;
  if (decay_steps <= 0 || step < start) return lr;
  // wsd decays from its first decay step and reaches min_lr at its last trained step
  // (max_steps - 1), as torchtitan's WSD does, so even a one-step decay decays; cosine and
  // linear reach min_lr at max_steps, one past the last step, as the cosine always has.
  const int64_t into_decay = kind == ScheduleKind::wsd ? step - start + 1 : step - start;
  const double progress = std::clamp(double(into_decay) / double(decay_steps), 0.0, 1.0);
  const DecayShape shape = kind == ScheduleKind::wsd      ? decay_shape
                           : kind == ScheduleKind::linear ? DecayShape::linear
                                                          : DecayShape::cosine;
  // As the cosine schedule computed it alone: GCC contracts this multiply-add into an FMA as
  // it did then (with the call inside the expression it did not), so its rates keep their bits.
  const double left = remaining(shape, progress);
  return float(min_lr + (lr - min_lr) * left);
}

}  // namespace st
