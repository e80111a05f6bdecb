#include "optim/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace st {

float LrSchedule::at(int64_t step) const {
  if (step < warmup_steps) return lr * float(step + 1) / float(warmup_steps);
  const int64_t decay_steps = max_steps - warmup_steps;
  if (decay_steps <= 0) return lr;
  const double progress = std::clamp(double(step - warmup_steps) / double(decay_steps), 0.0, 1.0);
  const double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  return float(min_lr + (lr - min_lr) * cosine);
}

}  // namespace st
