#include "simulate/replay.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"
#include "parallel/fsdp/fsdp_runtime.hpp"
#include "parallel/fsdp/unit_topology.hpp"

namespace st {

const char* collective_kind_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::all_gather:
      return "all-gather";
    case CollectiveKind::reduce_scatter:
      return "reduce-scatter";
    case CollectiveKind::all_reduce:
      return "all-reduce";
    case CollectiveKind::all_to_all:
      return "all-to-all";
  }
  return "?";
}

std::string CollectiveCall::label() const {
  if (group == GroupKind::tp)
    return fmt::format("TP {} ({} B)", collective_kind_name(kind), int64_t(bytes));
  if (unit < 0) return fmt::format("{} ({} B)", collective_kind_name(kind), int64_t(bytes));
  return fmt::format("{} unit {}", collective_kind_name(kind), unit);
}

namespace {

FsdpSchedule schedule_of(const StepPlan& plan) {
  ST_CHECK(!plan.units.empty(), "a step plan without units");
  return FsdpSchedule(UnitTopology::root_and_chain(int(plan.units.size())),
                      schedule_shape(plan.prefetch, plan.reshard_after_forward, plan.reshard_to,
                                     plan.accumulation, plan.micro_batches));
}

}  // namespace

int ReplayBackend::send(int, int, double) {
  fail("simulate: this backend has no point-to-point messages");
}
int ReplayBackend::recv(int, int, double) {
  fail("simulate: this backend has no point-to-point messages");
}

RankReplay::RankReplay(const StepPlan& plan, ReplayBackend& backend, int pp_rank)
    : plan_(plan),
      backend_(backend),
      units_(plan.units.size()),
      schedule_(schedule_of(plan)),
      pp_rank_(pp_rank) {}

// ShardedTrainer::step: micro-batches, finish_backward, update.
void RankReplay::run_step() {
  if (plan_.pipeline.ranks > 1) return pipelined_step();
  backend_.compute(plan_.step_overhead, "step overhead", -1);
  for (micro_ = 0; micro_ < plan_.micro_batches; ++micro_) micro_batch();
  drain_reductions(true);  // FsdpRuntime::finish_backward
  update();
}

// GPT::forward_backward: the root opens and closes both passes around the chain of blocks.
void RankReplay::micro_batch() {
  const int n = int(plan_.units.size());
  const SegmentTimes& c = plan_.compute;
  const TpCalls& tp = plan_.tp_calls;
  run(Hook::before_forward, 0);
  segment(c.root_forward_pre, tp.root_forward_pre, "forward", 0);
  for (int u = 1; u < n; ++u) {
    run(Hook::before_forward, u);
    segment(c.block_forward[size_t(u - 1)], tp.block_forward, "forward", u);
    run(Hook::after_forward, u);
  }
  segment(c.root_forward_post, tp.root_forward_post, "forward", 0);
  run(Hook::after_forward, 0);
  run(Hook::before_backward, 0);
  segment(c.root_backward_pre, tp.root_backward_pre, "backward", 0);
  for (int u = n - 1; u >= 1; --u) {
    run(Hook::before_backward, u);
    segment(c.block_backward[size_t(u - 1)], tp.block_backward, "backward", u);
    run(Hook::after_backward, u);
  }
  segment(c.root_backward_post, tp.root_backward_post, "backward", 0);
  run(Hook::after_backward, 0);
}

// Where in a segment each TP collective falls is the model's business; equal pieces keep the
// segment's total and its order of work and waits.
void RankReplay::segment(double seconds, const std::vector<TpCollective>& tp, const char* what,
                         int unit) {
  if (plan_.tp == 1 || tp.empty()) {
    backend_.compute(seconds, what, unit);
    return;
  }
  const double piece = seconds / double(tp.size() + 1);
  backend_.compute(piece, what, unit);
  for (const TpCollective& call : tp) {
    const CollectiveKind kind = call.op == TpOp::all_gather       ? CollectiveKind::all_gather
                                : call.op == TpOp::reduce_scatter ? CollectiveKind::reduce_scatter
                                                                  : CollectiveKind::all_reduce;
    tp_wait(backend_.issue({kind, GroupKind::tp, call.bytes, unit}));
    backend_.compute(piece, what, unit);
  }
}

void RankReplay::tp_wait(int handle) {
  const double begin = backend_.now();
  backend_.wait(handle);
  tp_exposed_ += backend_.now() - begin;
}

// The runtime's schedule (parallel/fsdp/schedule.hpp), action by action, as FsdpRuntime
// executes it.
void RankReplay::run(Hook hook, int u) {
  struct Executor final : ScheduleExecutor {
    RankReplay& r;
    explicit Executor(RankReplay& replay) : r(replay) {}
    void gather(int unit) override { r.issue_gather(unit); }
    void regather(int unit) override { r.issue_gather(unit); }  // from the reshard group
    void wait(int unit, bool) override { r.wait_and_bind(unit); }
    void release(int unit) override { r.release_full(unit); }
    void keep_slice(int unit) override {
      r.release_full(unit);
      r.units_[size_t(unit)].kept = true;
    }
    void progress() override { r.drain_reductions(false); }
    void reduce(int unit) override { r.issue_reduce(unit); }
  } executor(*this);
  schedule_.run(hook, u, micro_, executor);
}

// ShardedTrainer::update: with replicas the loss is all-reduced over the world first; the
// norm's all-reduce over the shard group carries it otherwise. Neither counts as exposed.
// With tensor or pipeline parallelism, the shared slices' gradients are summed over the TP group
// first, and the norm is summed over the model group (pp x dp_shard x tp): the world without
// replicas, else replayed on the shard group (16 bytes: the group's latency, a little short of the
// model's).
void RankReplay::update() {
  if (plan_.replicated)
    backend_.wait(backend_.issue({CollectiveKind::all_reduce, GroupKind::world, 8, -1}));
  // A pipeline rank's own: its held units' (PipelinePlan), else every unit's.
  const PipelinePlan& pp = plan_.pipeline;
  const auto own = [&](const std::vector<double>& per_rank, double whole) {
    return pp.ranks > 1 && !per_rank.empty() ? per_rank.at(size_t(pp_rank_)) : whole;
  };
  const double shared_grad_bytes = own(pp.tp_shared_grad_bytes, plan_.tp_shared_grad_bytes);
  if (plan_.tp > 1 && shared_grad_bytes > 0)
    tp_wait(backend_.issue({CollectiveKind::all_reduce, GroupKind::tp, shared_grad_bytes, -1}));
  const bool model_is_world = (plan_.tp > 1 || plan_.pipeline.ranks > 1) && !plan_.replicated;
  backend_.wait(backend_.issue(
      {CollectiveKind::all_reduce, model_is_world ? GroupKind::world : GroupKind::shard, 16, -1}));
  backend_.compute(own(pp.optimizer, plan_.optimizer), "optimizer", -1);
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
  const UnitPlan& p = plan_.units[size_t(u)];
  double bytes = double(p.padded_numel) * plan_.param_bytes;
  // A kept slice is gathered back within its reshard group (FsdpRuntime::issue_regather), as
  // it was decoded; other gathers carry every rank's encoded shard where quantized.
  const GroupKind group = unit.kept ? GroupKind::reshard : GroupKind::shard;
  if (!unit.kept && plan_.quantized.gather) {
    backend_.compute(codec(double(p.shard_numel)), "quantize", u);
    bytes = double(p.padded_numel / p.shard_numel) *
            double(quantized_bytes(plan_.gather_quantization, p.shard_numel));
    unit.encoded = true;
  }
  unit.kept = false;
  unit.gathering = backend_.issue({CollectiveKind::all_gather, group, bytes, u});
}

void RankReplay::wait_and_bind(int u, bool decode) {
  Unit& unit = units_[size_t(u)];
  if (unit.gathering >= 0) {
    timed_wait(unit.gathering, {CollectiveKind::all_gather, GroupKind::shard, 0, u});
    unit.gathering = -1;
  }
  if (unit.encoded && decode)
    backend_.compute(codec(double(plan_.units[size_t(u)].padded_numel)), "quantize", u);
  unit.encoded = false;
}

void RankReplay::release_full(int u) {
  Unit& unit = units_[size_t(u)];
  if (!unit.full) return;
  wait_and_bind(u, false);  // prefetched but never used: it lands before the memory is reused
  unit.full = false;
}

void RankReplay::issue_reduce(int u) {
  const UnitPlan& p = plan_.units[size_t(u)];
  const int L = plan_.quantized.reduce_per_node;
  Reduction r;
  r.unit = u;
  if (gradients_in_place(int(p.padded_numel / p.shard_numel), L > 0, plan_.accumulation,
                         plan_.micro_batches)) {
    // The runtime's backward wrote the shard itself; DDP sums it over the replicas at once.
    if (!plan_.replicated) return;
    r.next = Next::replicas;
    advance(r);
    reductions_.push_back(r);
    return;
  }
  const bool last_micro = micro_ == plan_.micro_batches - 1;
  r.sync_replicas = plan_.replicated && (plan_.replica_sync == ReplicaSync::each || last_micro);
  if (L == 0) {
    r.call = {CollectiveKind::reduce_scatter, GroupKind::shard, double(p.padded_numel) * 4, u};
    r.work = backend_.issue(r.call);
    r.next = r.sync_replicas ? Next::replicas : Next::done;
  } else {
    // qgZ: one FP32 reduce-scatter within the node per node's segments (none with one rank a
    // node), then the encoded exchange across nodes.
    const int K = int(p.padded_numel / p.shard_numel) / L;
    r.call = {CollectiveKind::reduce_scatter, GroupKind::node, double(L * p.shard_numel) * 4, u};
    for (int k = 0; L > 1 && k < K; ++k) r.earlier.push_back(backend_.issue(r.call));
    if (!r.earlier.empty()) {
      r.work = r.earlier.back();
      r.earlier.pop_back();
    }
    r.next = Next::exchange;
  }
  reductions_.push_back(r);
}

void RankReplay::advance(Reduction& r) {
  const UnitPlan& p = plan_.units[size_t(r.unit)];
  const int u = r.unit;
  const Quantization q = plan_.reduce_quantization;
  switch (r.next) {
    case Next::exchange: {
      const int K = int(p.padded_numel / p.shard_numel) / plan_.quantized.reduce_per_node;
      backend_.compute(codec(double(K * p.shard_numel)), "quantize", u);
      r.call = {CollectiveKind::all_to_all, GroupKind::column,
                double(K) * double(quantized_bytes(q, p.shard_numel)), u};
      r.work = backend_.issue(r.call);
      r.next = Next::sum;
      return;
    }
    case Next::sum: {
      const int K = int(p.padded_numel / p.shard_numel) / plan_.quantized.reduce_per_node;
      backend_.compute(codec(double(K * p.shard_numel)), "quantize", u);
      r.next = r.sync_replicas ? Next::replicas : Next::done;
      return;
    }
    case Next::replicas: {
      if (!plan_.quantized.replicas) {
        r.call = {CollectiveKind::all_reduce, GroupKind::replicas, double(p.shard_numel) * 4, u};
        r.work = backend_.issue(r.call);
        r.next = Next::done;
        return;
      }
      backend_.compute(codec(double(p.shard_numel)), "quantize", u);
      const int R = plan_.replicas;
      const int64_t chunk = (p.shard_numel + R - 1) / R;
      r.call = {CollectiveKind::all_to_all, GroupKind::replicas,
                double(R) * double(quantized_bytes(q, chunk)), u};
      r.work = backend_.issue(r.call);
      r.next = Next::replica_sum;
      return;
    }
    case Next::replica_sum: {
      const int R = plan_.replicas;
      const int64_t chunk = (p.shard_numel + R - 1) / R;
      backend_.compute(codec(double((R + 1) * chunk)), "quantize", u);
      r.call = {CollectiveKind::all_gather, GroupKind::replicas,
                double(R) * double(quantized_bytes(q, chunk)), u};
      r.work = backend_.issue(r.call);
      r.next = Next::replica_decode;
      return;
    }
    case Next::replica_decode:
      backend_.compute(codec(double(p.shard_numel)), "quantize", u);
      r.next = Next::done;
      return;
    case Next::done:
      return;
  }
}

void RankReplay::drain_reductions(bool block) {
  while (!reductions_.empty()) {
    Reduction& r = reductions_.front();
    if (r.work >= 0) {
      if (!block && !backend_.is_completed(r.work)) return;
      for (int h : r.earlier) timed_wait(h, r.call);
      r.earlier.clear();
      timed_wait(r.work, r.call);
      r.work = -1;
    }
    if (r.next == Next::done) {
      reductions_.pop_front();
      continue;
    }
    advance(r);
  }
}

}  // namespace st
