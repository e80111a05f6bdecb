#include "parallel/fsdp/schedule.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"

namespace st {

const char* action_kind_name(ActionKind kind) {
  switch (kind) {
    case ActionKind::gather:
      return "gather";
    case ActionKind::regather:
      return "regather";
    case ActionKind::wait:
      return "wait";
    case ActionKind::release:
      return "release";
    case ActionKind::keep_slice:
      return "keep_slice";
    case ActionKind::progress:
      return "progress";
    case ActionKind::reduce:
      return "reduce";
  }
  return "?";
}

namespace {

const char* hook_name(Hook hook) {
  switch (hook) {
    case Hook::before_forward:
      return "before_forward";
    case Hook::after_forward:
      return "after_forward";
    case Hook::before_backward:
      return "before_backward";
    case Hook::after_backward:
      return "after_backward";
  }
  return "?";
}

// A pass's planner: the state of each unit's unsharded buffer as the actions leave it.
struct Planner {
  const ScheduleShape& shape;
  std::vector<bool> full, kept;  // gathered (or in flight); an hpZ slice kept from the forward
  std::vector<ScheduleAction>* out = nullptr;

  void gather(int u) {
    if (full[size_t(u)]) return;
    full[size_t(u)] = true;
    out->push_back({kept[size_t(u)] ? ActionKind::regather : ActionKind::gather, u});
    kept[size_t(u)] = false;
  }
  // Unit u and the `prefetch` units after it in `order` are gathered or in flight.
  void prefetch(const std::vector<int>& order, int u) {
    const auto it = std::find(order.begin(), order.end(), u);
    ST_CHECK(it != order.end(), "unit {} is not in the unit order", u);
    const size_t pos = size_t(it - order.begin());
    for (size_t k = pos; k <= pos + size_t(shape.prefetch) && k < order.size(); ++k)
      gather(order[k]);
  }
  void release(int u) {
    if (!full[size_t(u)]) return;
    full[size_t(u)] = false;
    out->push_back({ActionKind::release, u});
  }
  void keep_slice(int u) {
    if (!full[size_t(u)]) return;
    full[size_t(u)] = false;
    kept[size_t(u)] = true;
    out->push_back({ActionKind::keep_slice, u});
  }
};

}  // namespace

FsdpSchedule::FsdpSchedule(const UnitTopology& topology, const ScheduleShape& shape)
    : shape_(shape),
      units_(int(topology.forward.size())),
      forward_order_(topology.forward),
      backward_order_(topology.backward) {
  ST_CHECK(units_ >= 1 && shape.prefetch >= 0 && shape.micro_batches >= 1,
           "a schedule of {} units, prefetch {}, {} micro-batches", units_, shape.prefetch,
           shape.micro_batches);
  Actions unused;
  plan_pass(topology, true, forward_, backward_reduce_);
  plan_pass(topology, false, unused, backward_accumulate_);
}

// One micro-batch: the forward from nothing gathered, then the backward from where the forward
// leaves the units. Every unit is released by the end of the backward, so each micro-batch
// starts alike.
void FsdpSchedule::plan_pass(const UnitTopology& t, bool reduce, Actions& forward,
                             Actions& backward) const {
  const size_t n = size_t(units_);
  forward.assign(n * kHooks, {});
  backward.assign(n * kHooks, {});
  Planner p{shape_, std::vector<bool>(n), std::vector<bool>(n)};
  const auto slot = [&](Actions& a, Hook h, int u) -> std::vector<ScheduleAction>& {
    return a[size_t(h) * n + size_t(u)];
  };
  // In the order models call the hooks: the root opens each pass and closes it, around the
  // chain of blocks.
  for (int u : t.forward) {
    p.out = &slot(forward, Hook::before_forward, u);
    p.prefetch(t.forward, u);
    p.out->push_back({ActionKind::wait, u});
    // The root is needed again at once by the head's backward, and the last unit of the
    // forward is the first of the backward: freeing either would only gather it again.
    if (UnitTopology::is_root(u) || u == t.last_forward()) continue;
    p.out = &slot(forward, Hook::after_forward, u);
    if (shape_.keep_slices)
      p.keep_slice(u);
    else if (shape_.reshard_after_forward)
      p.release(u);
  }
  const auto after_backward = [&](size_t i) {
    const int u = t.backward[i];
    p.out = &slot(backward, Hook::after_backward, u);
    p.release(u);
    // The next unit's prefetch goes onto the communication thread before this unit's
    // reduction (FSDP's BACKWARD_PRE): its operations run one at a time, and queued behind a
    // reduce-scatter as long as a block's backward, the gather made that backward wait.
    // Finished reductions progress first, so the same buffers are live as when it followed.
    p.out->push_back({ActionKind::progress, u});
    if (!UnitTopology::is_root(u) && i + 1 < t.backward.size())
      p.prefetch(t.backward, t.backward[i + 1]);
    if (reduce) p.out->push_back({ActionKind::reduce, u});
  };
  for (size_t i = 0; i < t.backward.size(); ++i) {
    const int u = t.backward[i];
    p.out = &slot(backward, Hook::before_backward, u);
    p.out->push_back({ActionKind::progress, u});
    p.prefetch(t.backward, u);
    p.out->push_back({ActionKind::wait, u});
    if (!UnitTopology::is_root(u)) after_backward(i);
  }
  after_backward(0);  // the root's, last
}

const std::vector<ScheduleAction>& FsdpSchedule::at(Hook hook, int unit, int micro) const {
  ST_CHECK(unit >= 0 && unit < units_ && micro >= 0 && micro < shape_.micro_batches,
           "unit {} of {}, micro-batch {} of {}", unit, units_, micro, shape_.micro_batches);
  const size_t i = size_t(hook) * size_t(units_) + size_t(unit);
  if (hook == Hook::before_forward || hook == Hook::after_forward) return forward_[i];
  const bool reduce = shape_.reduce_each_micro_batch || micro == shape_.micro_batches - 1;
  return reduce ? backward_reduce_[i] : backward_accumulate_[i];
}

void FsdpSchedule::run(Hook hook, int unit, int micro, ScheduleExecutor& x) const {
  const bool backward = hook == Hook::before_backward || hook == Hook::after_backward;
  for (const ScheduleAction& a : at(hook, unit, micro)) switch (a.kind) {
      case ActionKind::gather:
        x.gather(a.unit);
        break;
      case ActionKind::regather:
        x.regather(a.unit);
        break;
      case ActionKind::wait:
        x.wait(a.unit, backward);
        break;
      case ActionKind::release:
        x.release(a.unit);
        break;
      case ActionKind::keep_slice:
        x.keep_slice(a.unit);
        break;
      case ActionKind::progress:
        x.progress();
        break;
      case ActionKind::reduce:
        x.reduce(a.unit);
        break;
    }
}

std::string FsdpSchedule::describe(int micro) const {
  std::string out;
  const auto add = [&](Hook h, int u) {
    const auto& actions = at(h, u, micro);
    std::vector<std::string> words;
    for (const ScheduleAction& a : actions)
      words.push_back(fmt::format("{} {}", action_kind_name(a.kind), a.unit));
    out += fmt::format("{}{} {}:{}{}", out.empty() ? "" : "\n", hook_name(h), u,
                       words.empty() ? "" : " ", fmt::join(words, ", "));
  };
  // In the order models call the hooks.
  add(Hook::before_forward, forward_order_.front());
  for (size_t i = 1; i < forward_order_.size(); ++i) {
    add(Hook::before_forward, forward_order_[i]);
    add(Hook::after_forward, forward_order_[i]);
  }
  add(Hook::after_forward, forward_order_.front());
  add(Hook::before_backward, backward_order_.front());
  for (size_t i = 1; i < backward_order_.size(); ++i) {
    add(Hook::before_backward, backward_order_[i]);
    add(Hook::after_backward, backward_order_[i]);
  }
  add(Hook::after_backward, backward_order_.front());
  return out;
}

}  // namespace st
