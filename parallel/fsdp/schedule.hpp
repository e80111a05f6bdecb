#pragma once
// FSDP's step schedule as data: what happens at each hook of a pass (which all-gathers are
// issued, which unit is waited for and bound, freed or cut to its kept slice, when reductions
// progress and when a unit's gradient reduction starts), computed once from the unit topology
// and the options that shape it. FsdpRuntime executes it and the simulator's replay
// (simulate/replay.cpp) replays the same object, so the two cannot drift apart; what each
// action moves (bytes, groups, quantization) is theirs.
#include <string>
#include <vector>

#include "parallel/fsdp/unit_topology.hpp"

namespace st {

enum class Hook { before_forward, after_forward, before_backward, after_backward };
inline constexpr int kHooks = 4;

enum class ActionKind {
  gather,      // issue the unit's all-gather over the shard group
  regather,    // hpZ: issue the all-gather of its kept slices within the reshard group
  wait,        // wait for the unit's gather and bind its parameters (and gradients, backward)
  release,     // free the unsharded unit (a gather still in flight lands first)
  keep_slice,  // hpZ: keep this rank's 1/N slice of the unsharded unit and free the rest
  progress,    // start the next stage of each reduction, in order, whose current one is done
  reduce,      // start the unit's gradient reduction (the backward's last micro-batch, or each)
};
const char* action_kind_name(ActionKind kind);

struct ScheduleAction {
  ActionKind kind;
  int unit;
  bool operator==(const ScheduleAction&) const = default;
};

// What carries a schedule's actions out: FsdpRuntime with tensors and collectives, the
// simulator's replay with time (FsdpSchedule::run calls one method per action).
class ScheduleExecutor {
 public:
  virtual ~ScheduleExecutor() = default;
  virtual void gather(int unit) = 0;
  virtual void regather(int unit) = 0;
  virtual void wait(int unit, bool backward) = 0;  // and bind (with gradients in the backward)
  virtual void release(int unit) = 0;
  virtual void keep_slice(int unit) = 0;
  virtual void progress() = 0;
  virtual void reduce(int unit) = 0;
};

struct ScheduleShape {
  int prefetch = 1;                   // units gathered ahead of the one computing
  bool reshard_after_forward = true;  // ZeRO-3; false: ZeRO-2
  bool keep_slices = false;           // hpZ (reshard_after_forward = N)
  bool reduce_each_micro_batch = true;
  int micro_batches = 1;
};

class FsdpSchedule {
 public:
  FsdpSchedule(const UnitTopology& topology, const ScheduleShape& shape);

  // The actions of `hook` for `unit` in micro-batch `micro`. The forward is the same in every
  // micro-batch (each starts with nothing gathered) and in evaluation's forward-only passes;
  // the backward differs where gradients accumulate without a reduction.
  const std::vector<ScheduleAction>& at(Hook hook, int unit, int micro) const;
  // Carries out at(hook, unit, micro) on `executor`, action by action.
  void run(Hook hook, int unit, int micro, ScheduleExecutor& executor) const;
  const ScheduleShape& shape() const { return shape_; }
  // Every action of one micro-batch, a line per hook in the order models call them, for tests:
  // "before_forward 0: gather 0, gather 1, wait 0".
  std::string describe(int micro) const;

 private:
  using Actions = std::vector<std::vector<ScheduleAction>>;  // [hook * units + unit]
  void plan_pass(const UnitTopology& t, bool reduce, Actions& forward, Actions& backward) const;

  ScheduleShape shape_;
  int units_ = 0;
  std::vector<int> forward_order_, backward_order_;
  Actions forward_, backward_reduce_, backward_accumulate_;
};

}  // namespace st
