#pragma once
// What a caller of ShardedModel::step sees of the step's phases. The step runs them in its one
// order (for the library's users and the program's trainer alike): each micro-batch's forward
// and backward (gradients reduce-scattered as units finish), the last reductions, then the
// update (the global loss and norm, clipping, the optimizer). An observer times or traces
// them, or does work that must come between two (a background save's copy before the update).
#include "core/model/model.hpp"

namespace st {

enum class StepPhase {
  finish_backward,  // the last reduce-scatters (and replica all-reduces)
  update,           // loss and norm all-reduced, clipping, the optimizer on the master shards
};

class StepObserver {
 public:
  virtual ~StepObserver() = default;
  // The unit hooks micro-batch `micro` runs with: `runtime` itself, or hooks of the observer's
  // that forward every call to it (a clock, say), alive until after_micro_batch(micro).
  virtual UnitHooks& micro_batch_hooks(int micro, UnitHooks& runtime) {
    (void)micro;
    return runtime;
  }
  virtual void after_micro_batch(int micro) { (void)micro; }
  virtual void before(StepPhase) {}
  virtual void after(StepPhase) {}
};

}  // namespace st
