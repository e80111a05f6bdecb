#pragma once
// Passes unit hooks through to `inner`, notes when the forward of the whole model ends (the
// root unit's after_forward) so a step splits into forward and backward time, and, when a
// trace is being recorded, records each unit's forward and backward as compute spans.
#include <string>
#include <vector>

#include "core/model/model.hpp"
#include "core/timer.hpp"
#include "core/trace.hpp"

namespace st {

class PhaseClock final : public UnitHooks {
 public:
  // `unit_names[u]` names unit u in traces (may be empty: "unit u").
  explicit PhaseClock(UnitHooks& inner, const std::vector<std::string>* unit_names = nullptr)
      : inner_(inner), names_(unit_names), trace_(TraceRecorder::active()) {}

  void before_forward(int unit) override {
    inner_.before_forward(unit);
    begin(unit);
  }
  void after_forward(int unit) override {
    end("forward", unit);
    inner_.after_forward(unit);
    if (unit == 0) forward_end_ms = clock.ms();
  }
  void before_backward(int unit) override {
    inner_.before_backward(unit);
    begin(unit);
  }
  void after_backward(int unit) override {
    end("backward", unit);
    inner_.after_backward(unit);
  }

  Timer clock;
  double forward_end_ms = 0;

 private:
  void begin(int unit) {
    if (!trace_) return;
    if (begins_.size() <= size_t(unit)) begins_.resize(size_t(unit) + 1);
    begins_[size_t(unit)] = trace_now_us();
  }
  void end(const char* phase, int unit) {
    if (!trace_) return;
    const std::string name = names_ && size_t(unit) < names_->size()
                                 ? (*names_)[size_t(unit)]
                                 : "unit " + std::to_string(unit);
    trace_->add(std::string(phase) + " " + name, TraceTrack::compute, begins_[size_t(unit)],
                trace_now_us());
  }

  UnitHooks& inner_;
  const std::vector<std::string>* names_;
  TraceRecorder* trace_;
  std::vector<double> begins_;
};

}  // namespace st
