#include "simulate/replay.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"
#include "sharding/unit_topology.hpp"

namespace st {

const char* collective_kind_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::all_gather:
      return "all-gather";
    case CollectiveKind::reduce_scatter:
      return "reduce-scatter";
    case CollectiveKind::all_reduce:
      return "all-reduce";
  }
  return "?";
}

std::string CollectiveCall::label() const {
  if (unit < 0) return fmt::format("{} ({} B)", collective_kind_name(kind), int64_t(bytes));
  return fmt::format("{} unit {}", collective_kind_name(kind), unit);
}

RankReplay::RankReplay(const StepPlan& plan, ReplayBackend& backend)
    : plan_(plan), backend_(backend), units_(plan.units.size()) {
  ST_CHECK(!plan.units.empty(), "a step plan without units");
  const UnitTopology t = UnitTopology::root_and_chain(int(plan.units.size()));
  forward_order_ = t.forward;
  backward_order_ = t.backward;
}

// ShardedTrainer::step: micro-batches, finish_backward, update.
void RankReplay::run_step() {
  backend_.compute(plan_.step_overhead, "step overhead", -1);
  for (micro_ = 0; micro_ < plan_.micro_batches; ++micro_) micro_batch();
  drain_reductions(true);  // FsdpRuntime::finish_backward
  update();
}

// GPT::forward_backward: the root opens and closes both passes around the chain of blocks.
void RankReplay::micro_batch() {
  const int n = int(plan_.units.size());
  before_forward(0);
  backend_.compute(plan_.root_forward_pre, "forward", 0);
  for (int u = 1; u < n; ++u) {
    before_forward(u);
    backend_.compute(plan_.block_forward[size_t(u)], "forward", u);
    after_forward(u);
  }
  backend_.compute(plan_.root_forward_post, "forward", 0);
  after_forward(0);
  before_backward(0);
  backend_.compute(plan_.root_backward_pre, "backward", 0);
  for (int u = n - 1; u >= 1; --u) {
    before_backward(u);
    backend_.compute(plan_.block_backward[size_t(u)], "backward", u);
    after_backward(u);
  }
  backend_.compute(plan_.root_backward_post, "backward", 0);
  after_backward(0);
}

// ShardedTrainer::update: with replicas the loss is all-reduced over the world first; the
// norm's all-reduce over the shard group carries it otherwise. Neither counts as exposed.
void RankReplay::update() {
  if (plan_.replicated)
    backend_.wait(backend_.issue({CollectiveKind::all_reduce, GroupKind::world, 8, -1}));
  backend_.wait(backend_.issue({CollectiveKind::all_reduce, GroupKind::shard, 16, -1}));
  backend_.compute(plan_.optimizer, "optimizer", -1);
}

void RankReplay::timed_wait(int handle, const CollectiveCall& call) {
  if (backend_.is_completed(handle)) return;
  const double begin = backend_.now();
  backend_.wait(handle);
  const double waited = backend_.now() - begin;
  exposed_ += waited;
  if (waited > longest_wait_) {
    longest_wait_ = waited;
    longest_wait_label_ = call.label();
  }
}

void RankReplay::issue_gather(int u) {
  Unit& unit = units_[size_t(u)];
  if (unit.full) return;
  unit.full = true;
  const double bytes = double(plan_.units[size_t(u)].padded_numel) * plan_.param_bytes;
  // A kept slice is gathered back within its reshard group (FsdpRuntime::issue_regather).
  const GroupKind group = unit.kept ? GroupKind::reshard : GroupKind::shard;
  unit.kept = false;
  unit.gathering = backend_.issue({CollectiveKind::all_gather, group, bytes, u});
}

void RankReplay::prefetch(const std::vector<int>& order, int u) {
  const size_t pos = size_t(std::find(order.begin(), order.end(), u) - order.begin());
  for (size_t k = pos; k <= pos + size_t(plan_.prefetch) && k < order.size(); ++k)
    issue_gather(order[k]);
}

void RankReplay::wait_and_bind(int u) {
  Unit& unit = units_[size_t(u)];
  if (unit.gathering >= 0) {
    timed_wait(unit.gathering, {CollectiveKind::all_gather, GroupKind::shard, 0, u});
    unit.gathering = -1;
  }
}

void RankReplay::release_full(int u) {
  Unit& unit = units_[size_t(u)];
  if (!unit.full) return;
  wait_and_bind(u);  // prefetched but never used: it lands before the memory is reused
  unit.full = false;
}

void RankReplay::before_forward(int u) {
  prefetch(forward_order_, u);
  wait_and_bind(u);
}

void RankReplay::after_forward(int u) {
  if (UnitTopology::is_root(u) || u == forward_order_.back()) return;
  if (plan_.reshard_to > 1 && units_[size_t(u)].full) {
    release_full(u);
    units_[size_t(u)].kept = true;
  } else if (plan_.reshard_after_forward) {
    release_full(u);
  }
}

void RankReplay::before_backward(int u) {
  drain_reductions(false);
  prefetch(backward_order_, u);
  wait_and_bind(u);
}

void RankReplay::after_backward(int u) {
  release_full(u);
  const bool last_micro = micro_ == plan_.micro_batches - 1;
  if (plan_.accumulation == Accumulation::reduce_each || last_micro) issue_reduce(u);
}

void RankReplay::issue_reduce(int u) {
  Reduction r;
  r.unit = u;
  const bool last_micro = micro_ == plan_.micro_batches - 1;
  r.sync_replicas = plan_.replicated && (plan_.replica_sync == ReplicaSync::each || last_micro);
  const double bytes = double(plan_.units[size_t(u)].padded_numel) * 4;
  r.work = backend_.issue({CollectiveKind::reduce_scatter, GroupKind::shard, bytes, u});
  reductions_.push_back(r);
}

void RankReplay::drain_reductions(bool block) {
  while (!reductions_.empty()) {
    Reduction& r = reductions_.front();
    if (!block && !backend_.is_completed(r.work)) return;
    const CollectiveKind kind =
        r.replica_stage ? CollectiveKind::all_reduce : CollectiveKind::reduce_scatter;
    timed_wait(r.work, {kind, r.replica_stage ? GroupKind::replicas : GroupKind::shard, 0, r.unit});
    if (r.sync_replicas && !r.replica_stage) {
      const double bytes = double(plan_.units[size_t(r.unit)].shard_numel) * 4;
      r.work = backend_.issue({CollectiveKind::all_reduce, GroupKind::replicas, bytes, r.unit});
      r.replica_stage = true;
      continue;
    }
    reductions_.pop_front();
  }
}

}  // namespace st
