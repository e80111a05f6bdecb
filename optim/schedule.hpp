#pragma once
#include <cstdint>

namespace st {

// optimizer.schedule: what the learning rate does after the warm-up.
enum class ScheduleKind { cosine, linear, constant, wsd };
// optimizer.decay_shape: how warmup-stable-decay falls from `lr` to `min_lr`, with the decay's
// progress p from 0 to 1: linearly (1 - p), as a half cosine, or as 1 - sqrt(p) (the shape of
// MiniCPM's and SmolLM's recipes: steep at first, flat at the end).
enum class DecayShape { linear, cosine, sqrt };
const char* schedule_kind_name(ScheduleKind kind);
const char* decay_shape_name(DecayShape shape);

// Linear warm-up from lr/warmup to lr over `warmup_steps`, then by `kind`:
//   cosine    cosine decay to `min_lr` at `max_steps`;
//   linear    linear decay to `min_lr` at `max_steps`;
//   constant  `lr` (min_lr unused);
//   wsd       `lr` until the last `decay_fraction` of `max_steps` (at least one step, never
//             into the warm-up), then `decay_shape` down to `min_lr` at the last step trained,
//             `max_steps` - 1 (its first decay step already decays, as torchtitan's WSD).
// A pure function of the step and these fields: a resumed or restarted run continues it exactly.
struct LrSchedule {
  float lr = 1e-3f;
  float min_lr = 1e-4f;
  int64_t warmup_steps = 0;
  int64_t max_steps = 1;
  ScheduleKind kind = ScheduleKind::cosine;
  double decay_fraction = 0.1;                  // wsd only
  DecayShape decay_shape = DecayShape::linear;  // wsd only

  // Learning rate for step `step` (0-based).
  float at(int64_t step) const;
  // The step at which the decay starts (max_steps for constant: none).
  int64_t decay_start() const;
};

}  // namespace st
