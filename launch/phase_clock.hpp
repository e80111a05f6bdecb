#pragma once
// Passes unit hooks through to `inner` and notes when the forward of the whole model ends
// (the root unit's after_forward), so a step splits into forward and backward time.
#include "core/model/param_spec.hpp"
#include "core/timer.hpp"

namespace st {

class PhaseClock final : public UnitHooks {
 public:
  explicit PhaseClock(UnitHooks& inner) : inner_(inner) {}
  void before_forward(int unit) override { inner_.before_forward(unit); }
  void after_forward(int unit) override {
    inner_.after_forward(unit);
    if (unit == 0) forward_end_ms = clock.ms();
  }
  void before_backward(int unit) override { inner_.before_backward(unit); }
  void after_backward(int unit) override { inner_.after_backward(unit); }

  Timer clock;
  double forward_end_ms = 0;

 private:
  UnitHooks& inner_;
};

}  // namespace st
