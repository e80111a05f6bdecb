#pragma once
// The faults a test injects into `train`, gathered in one seam the training loop calls at the
// start of each step: a rank that dies after a step (shardrun --fault kill:R@S, through
// SHARDRUN_FAULT_KILL), a main thread that hangs before a step (--test-hang-at-step, while its
// heartbeat goes on),
// checkpoint writes slowed so a test can kill a save (--test-slow-checkpoint-ms). The two flags
// are hidden from `shardtrain train --help`; without them and the variable, nothing happens.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace st {

struct CommonOptions;

class FaultInjection {
 public:
  // Read once at start-up; a malformed SHARDRUN_FAULT_KILL is an InputError naming it.
  FaultInjection(const CommonOptions& options, int world_rank);
  // At the start of training step `step` (0-based): kill_if_due, then hold_if_due.
  void before_step(int64_t step) const {
    kill_if_due(step);
    hold_if_due(step);
  }
  // SIGKILL if this rank is to die after step `step` (1-based: the step just done).
  void kill_if_due(int64_t step) const;
  // At the start of training step `step` (0-based): when shardrun injects a fault of its own
  // after step `step` (1-based), waits until it says the fault is in place (the file
  // released-STEP in SHARDRUN_FAULT_FIRED), at most a minute: the fault lands before the next
  // step however slowly the launcher runs on a loaded machine.
  void hold_if_due(int64_t step) const;
  // Once the step is noted as this rank's progress: blocks forever if the main thread is to
  // hang before step `step` + 1 (1-based), so the others see it stuck at that step. While it
  // hangs it prints each newest complete checkpoint `newest` names ("test: hanging before step
  // S; newest complete checkpoint: PATH", stderr), so a test can wait for a background save to
  // be recorded instead of sleeping.
  void hang_if_due(int64_t step, const std::function<std::string()>& newest) const;
  // Milliseconds each checkpoint write sleeps after a unit (0: none).
  int slow_checkpoint_ms() const { return slow_checkpoint_ms_; }

 private:
  std::vector<int64_t> kill_after_;
  std::vector<int64_t> hold_after_;
  int64_t hang_at_step_ = 0;
  int slow_checkpoint_ms_ = 0;
  int world_rank_ = 0;
};

}  // namespace st
