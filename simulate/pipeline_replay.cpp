// RankReplay's pipelined step: what ShardedModel::pipelined_gradients and PipelineRuntime::run
// do on one pipeline rank, action by action from the one PipelineSchedule object, with time.
#include <algorithm>
#include <map>
#include <tuple>

#include "core/error.hpp"
#include "parallel/pipeline/pipeline_runtime.hpp"
#include "simulate/replay.hpp"

namespace st {
namespace {

enum Direction { activation = 0, gradient = 1 };

int pipeline_tag(Direction d, int stage, int micro, int stages, int micro_batches) {
  return int(pipeline_message_tag(d == gradient, stage, micro, stages, micro_batches));
}

}  // namespace

std::vector<int> RankReplay::held_units() const {
  const PipelinePlan& pp = plan_.pipeline;
  std::vector<int> units;
  if (pp_rank_ == 0 || pp_rank_ == pp.ranks - 1) units.push_back(0);
  for (size_t s = size_t(pp_rank_); s < pp.stages.size(); s += size_t(pp.ranks))
    for (int l = pp.stages[s].first; l < pp.stages[s].end; ++l) units.push_back(l + 1);
  std::sort(units.begin(), units.end());
  return units;
}

// ShardedModel::pipelined_gradients, then finish_backward and sum_root_gradient, then update.
void RankReplay::pipelined_step() {
  const PipelinePlan& pp = plan_.pipeline;
  ST_CHECK(int(pp.stages.size()) == pp.ranks * pp.virtual_stages,
           "a pipeline plan of {} stages for {} ranks x {} virtual stages", pp.stages.size(),
           pp.ranks, pp.virtual_stages);
  ST_CHECK(pp.stages.back().end + 1 == int(plan_.units.size()),
           "a pipeline plan's stages hold {} blocks of a model of {} units", pp.stages.back().end,
           plan_.units.size());
  backend_.compute(plan_.step_overhead, "step overhead", -1);
  // FsdpRuntime::hold_for_step: every held unit's all-gather issued, then each waited for.
  const std::vector<int> held = held_units();
  for (int u : held) issue_gather(u);
  for (int u : held) wait_and_bind(u);
  pipeline_actions();
  // FsdpRuntime::reduce_held_units: each unit reduced once, as at the last micro-batch.
  micro_ = plan_.micro_batches - 1;
  for (auto u = held.rbegin(); u != held.rend(); ++u) issue_reduce(*u);
  drain_reductions(true);
  sum_root_gradient();
  update();
}

// PipelineRuntime::run: receives posted kPipelineReceivesAhead actions ahead, each action waiting
// for its input, computing, and sending its output; the sends waited for at the end.
void RankReplay::pipeline_actions() {
  const PipelinePlan& pp = plan_.pipeline;
  const PipelineSchedule schedule(pp.schedule, {pp.ranks, pp.virtual_stages, plan_.micro_batches});
  const std::vector<PipeAction>& actions = schedule.actions(pp_rank_);
  const int S = schedule.shape().stages(), M = plan_.micro_batches, last = S - 1;
  std::map<std::tuple<int, int, int>, int> receives;  // (direction, stage, micro) -> handle
  std::vector<int> sends;
  const double begin = backend_.now();
  size_t posted = 0;
  for (size_t i = 0; i < actions.size(); ++i) {
    for (; posted < actions.size() && posted <= i + kPipelineReceivesAhead; ++posted) {
      const PipeAction& a = actions[posted];
      const bool forward = a.op == PipeOp::forward;
      if (a.op == PipeOp::backward_weight || (forward ? a.stage == 0 : a.stage == last)) continue;
      const Direction d = forward ? activation : gradient;
      const int from = (forward ? a.stage - 1 : a.stage + 1) % pp.ranks;
      receives[{d, a.stage, a.micro_batch}] =
          backend_.recv(from, pipeline_tag(d, a.stage, a.micro_batch, S, M), pp.boundary_bytes);
    }
    const PipeAction& a = actions[i];
    const bool forward = a.op == PipeOp::forward, weight = a.op == PipeOp::backward_weight;
    if (!weight && (forward ? a.stage > 0 : a.stage < last)) {
      const auto it = receives.find({forward ? activation : gradient, a.stage, a.micro_batch});
      ST_CHECK(it != receives.end(), "pipeline replay: no receive for stage {} micro-batch {}",
               a.stage, a.micro_batch);
      backend_.wait(it->second);
      receives.erase(it);
    }
    const double start = backend_.now();
    stage_compute(a);
    pipeline_compute_ += backend_.now() - start;
    if (!weight && (forward ? a.stage < last : a.stage > 0)) {
      const int to_stage = forward ? a.stage + 1 : a.stage - 1;
      sends.push_back(backend_.send(
          to_stage % pp.ranks,
          pipeline_tag(forward ? activation : gradient, to_stage, a.micro_batch, S, M),
          pp.boundary_bytes));
    }
  }
  for (int h : sends) backend_.wait(h);
  pipeline_time_ = backend_.now() - begin;
}

// A stage's part of a micro-batch, in the segments of micro_batch(): the embedding on the
// first stage, the head and loss on the last. Zero bubble's input half is the backward but its
// weight-gradient matmuls (weight_share of each block's backward, head_weight_share of the
// head's), which the weight half runs; the embedding's gradient stays in the input half.
void RankReplay::stage_compute(const PipeAction& a) {
  const PipelinePlan& pp = plan_.pipeline;
  const SegmentTimes& c = plan_.compute;
  const TpCalls& tp = plan_.tp_calls;
  const StageRange& r = pp.stages[size_t(a.stage)];
  const bool first = a.stage == 0, last = a.stage == int(pp.stages.size()) - 1;
  switch (a.op) {
    case PipeOp::forward:
      if (first) segment(c.root_forward_pre, tp.root_forward_pre, "forward", 0);
      for (int l = r.first; l < r.end; ++l)
        segment(c.block_forward[size_t(l)], tp.block_forward, "forward", l + 1);
      if (last) segment(c.root_forward_post, tp.root_forward_post, "forward", 0);
      return;
    case PipeOp::backward:
    case PipeOp::backward_input: {
      const bool whole = a.op == PipeOp::backward;
      const double share = whole ? 1.0 : 1.0 - pp.weight_share;
      if (last)
        segment(c.root_backward_pre * (whole ? 1.0 : 1.0 - pp.head_weight_share),
                tp.root_backward_pre, "backward", 0);
      for (int l = r.end - 1; l >= r.first; --l)
        segment(c.block_backward[size_t(l)] * share, tp.block_backward, "backward", l + 1);
      if (first) segment(c.root_backward_post, tp.root_backward_post, "backward", 0);
      return;
    }
    case PipeOp::backward_weight:
      if (last) backend_.compute(c.root_backward_pre * pp.head_weight_share, "weight gradient", 0);
      for (int l = r.end - 1; l >= r.first; --l)
        backend_.compute(c.block_backward[size_t(l)] * pp.weight_share, "weight gradient", l + 1);
      return;
  }
}

// ShardedModel::sum_root_gradient: the first and the last pipeline rank exchange their shards
// of the root unit's FP32 gradient (a middle rank, or one holding both ends, has nothing to do).
void RankReplay::sum_root_gradient() {
  const int last = plan_.pipeline.ranks - 1;
  if (pp_rank_ != 0 && pp_rank_ != last) return;
  const double bytes = double(plan_.units[0].shard_numel) * 4;
  const int peer = pp_rank_ == 0 ? last : 0;
  const int got = backend_.recv(peer, 0, bytes);
  backend_.wait(backend_.send(peer, 0, bytes));
  backend_.wait(got);
}

}  // namespace st
