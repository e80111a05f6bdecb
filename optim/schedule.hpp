#pragma once
#include <cstdint>

namespace st {

// Linear warm-up from lr/warmup to lr over `warmup_steps`, then cosine decay to `min_lr`
// at `max_steps`.
struct LrSchedule {
  float lr = 1e-3f;
  float min_lr = 1e-4f;
  int64_t warmup_steps = 0;
  int64_t max_steps = 1;

  // Learning rate for step `step` (0-based).
  float at(int64_t step) const;
};

}  // namespace st
