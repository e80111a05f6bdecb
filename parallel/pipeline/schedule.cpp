#include "parallel/pipeline/schedule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>

#include "core/error.hpp"

namespace st {

const char* pipe_schedule_name(PipeSchedule s) {
  switch (s) {
    case PipeSchedule::gpipe:
      return "gpipe";
    case PipeSchedule::one_f_one_b:
      return "1f1b";
    case PipeSchedule::interleaved_1f1b:
      return "interleaved_1f1b";
    case PipeSchedule::zero_bubble:
      return "zero_bubble";
  }
  return "?";
}

bool parse_pipe_schedule(const std::string& name, PipeSchedule* out) {
  for (PipeSchedule s : {PipeSchedule::gpipe, PipeSchedule::one_f_one_b,
                         PipeSchedule::interleaved_1f1b, PipeSchedule::zero_bubble})
    if (name == pipe_schedule_name(s)) {
      *out = s;
      return true;
    }
  return false;
}

const char* pipe_op_name(PipeOp op) {
  switch (op) {
    case PipeOp::forward:
      return "F";
    case PipeOp::backward:
      return "B";
    case PipeOp::backward_input:
      return "Bi";
    case PipeOp::backward_weight:
      return "W";
  }
  return "?";
}

namespace {

constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();

// When each stage's actions of each micro-batch ended, as a replay learns them.
class Replay {
 public:
  Replay(const PipelineSchedule& s, const PipeCosts& costs)
      : s_(s), costs_(costs), forward_(grid()), input_grad_(grid()), weight_grad_(grid()) {}

  double cost(PipeOp op) const {
    switch (op) {
      case PipeOp::forward:
        return costs_.forward;
      case PipeOp::backward:
        return costs_.backward_input + costs_.backward_weight;
      case PipeOp::backward_input:
        return costs_.backward_input;
      case PipeOp::backward_weight:
        return costs_.backward_weight;
    }
    return 0;
  }

  // When `a`'s inputs are on its rank, or nullopt while one of them is not computed yet.
  std::optional<double> ready(const PipeAction& a) const {
    const int S = s_.shape().stages(), m = a.micro_batch, st = a.stage;
    double at = 0;
    auto after = [&](const std::vector<std::vector<double>>& ends, int stage) {
      const double end = ends[size_t(stage)][size_t(m)];
      if (end != end) return false;  // NaN: not yet
      const double hop = s_.rank_of_stage(stage) == s_.rank_of_stage(st) ? 0 : costs_.transfer;
      at = std::max(at, end + hop);
      return true;
    };
    switch (a.op) {
      case PipeOp::forward:
        if (st > 0 && !after(forward_, st - 1)) return std::nullopt;
        break;
      case PipeOp::backward:
      case PipeOp::backward_input:
        if (!after(forward_, st)) return std::nullopt;
        if (st < S - 1 && !after(input_grad_, st + 1)) return std::nullopt;
        break;
      case PipeOp::backward_weight:
        if (!after(input_grad_, st)) return std::nullopt;
        break;
    }
    return at;
  }

  void finish(const PipeAction& a, double end) {
    auto set = [&](std::vector<std::vector<double>>& ends) {
      double& slot = ends[size_t(a.stage)][size_t(a.micro_batch)];
      if (slot == slot)
        fail("pipeline schedule {}: {}{} of stage {} appears twice", pipe_schedule_name(s_.kind()),
             pipe_op_name(a.op), a.micro_batch, a.stage);
      slot = end;
    };
    if (a.op == PipeOp::forward) set(forward_);
    if (a.op == PipeOp::backward || a.op == PipeOp::backward_input) set(input_grad_);
    if (a.op == PipeOp::backward || a.op == PipeOp::backward_weight) set(weight_grad_);
  }

  // Every stage's every micro-batch has its forward and both backward halves.
  void check_complete() const {
    for (int st = 0; st < s_.shape().stages(); ++st)
      for (int m = 0; m < s_.shape().micro_batches; ++m)
        for (const auto* ends : {&forward_, &input_grad_, &weight_grad_}) {
          const double end = (*ends)[size_t(st)][size_t(m)];
          if (end != end)
            fail("pipeline schedule {}: stage {} misses micro-batch {}'s {}",
                 pipe_schedule_name(s_.kind()), st, m,
                 ends == &forward_ ? "forward"
                                   : (ends == &input_grad_ ? "input gradient" : "weight gradient"));
        }
  }

 private:
  std::vector<std::vector<double>> grid() const {
    return std::vector<std::vector<double>>(
        size_t(s_.shape().stages()),
        std::vector<double>(size_t(s_.shape().micro_batches), kUnknown));
  }

  const PipelineSchedule& s_;
  PipeCosts costs_;
  std::vector<std::vector<double>> forward_, input_grad_, weight_grad_;
};

std::vector<PipeAction> gpipe_order(const PipeShape& p, int rank) {
  std::vector<PipeAction> actions;
  for (int m = 0; m < p.micro_batches; ++m) actions.push_back({PipeOp::forward, m, rank});
  for (int m = 0; m < p.micro_batches; ++m) actions.push_back({PipeOp::backward, m, rank});
  return actions;
}

// 1F1B and Megatron's interleaved 1F1B (one virtual stage: plain 1F1B). The k-th forward of a
// rank takes micro-batches in groups of P through its virtual stages in turn; its k-th backward
// the same through them in reverse.
std::vector<PipeAction> one_f_one_b_order(const PipeShape& p, int rank, PipeOp backward) {
  const int P = p.ranks, V = p.virtual_stages, total = V * p.micro_batches;
  auto nth = [&](int k, bool forward) {
    const int group = k / (P * V), within = k % (P * V);
    const int chunk = forward ? within / P : V - 1 - within / P;
    return PipeAction{forward ? PipeOp::forward : backward, group * P + within % P,
                      chunk * P + rank};
  };
  const int warmup = std::min(V == 1 ? P - 1 - rank : (P - 1 - rank) * 2 + (V - 1) * P, total);
  std::vector<PipeAction> actions;
  for (int k = 0; k < warmup; ++k) actions.push_back(nth(k, true));
  for (int k = 0; k < total - warmup; ++k) {
    actions.push_back(nth(warmup + k, true));
    actions.push_back(nth(k, false));
  }
  for (int k = total - warmup; k < total; ++k) actions.push_back(nth(k, false));
  return actions;
}

// ZB-H1: 1F1B's forwards and input gradients in 1F1B's order; each weight gradient waits in a
// queue and is placed where its rank would otherwise wait at least as long as it takes, or
// before a forward that would hold more micro-batches than 1F1B does (P - r), found by
// replaying the order with equal times for the three (so every gap is a whole number of them);
// what is left goes at the end. In the steady state that is F, Bi, W on every rank; the weight
// gradients fill the drain's bubbles.
std::vector<std::vector<PipeAction>> zero_bubble_orders(const PipelineSchedule& s) {
  const PipeShape& p = s.shape();
  const PipeCosts unit;
  std::vector<std::vector<PipeAction>> main(size_t(p.ranks)), out(size_t(p.ranks)),
      pending(size_t(p.ranks));
  for (int r = 0; r < p.ranks; ++r)
    main[size_t(r)] = one_f_one_b_order(p, r, PipeOp::backward_input);
  std::vector<size_t> next(size_t(p.ranks), 0);
  std::vector<double> now(size_t(p.ranks), 0);
  Replay replay(s, unit);
  for (;;) {
    bool progressed = false, all_done = true;
    // The ranks in order of their clocks: the earliest acts first.
    std::vector<int> order(size_t(p.ranks));
    for (int r = 0; r < p.ranks; ++r) order[size_t(r)] = r;
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return now[size_t(a)] < now[size_t(b)]; });
    for (int r : order) {
      auto& queue = pending[size_t(r)];
      const size_t i = next[size_t(r)];
      if (i == main[size_t(r)].size()) continue;
      all_done = false;
      const PipeAction& a = main[size_t(r)][i];
      const std::optional<double> at = replay.ready(a);
      // What its inputs could arrive by at the earliest, while not computed yet: after another
      // rank's next action (each takes one unit).
      double earliest = std::numeric_limits<double>::infinity();
      if (!at)
        for (int o = 0; o < p.ranks; ++o)
          if (o != r && next[size_t(o)] < main[size_t(o)].size())
            earliest = std::min(earliest, now[size_t(o)] + 1);
      const double start = at ? std::max(now[size_t(r)], *at) : earliest;
      // Rank r defers at most r weight gradients: with 1F1B's P - r micro-batches before their
      // input gradient, it holds at most P (1F1B's peak, rank 0's), and the drain, where rank r
      // waits r times for the input gradients coming back, has one to fill each wait.
      const bool full = queue.size() > size_t(r);
      if (!queue.empty() && (full || start >= now[size_t(r)] + unit.backward_weight)) {
        const PipeAction w = queue.front();
        queue.erase(queue.begin());
        now[size_t(r)] += unit.backward_weight;
        replay.finish(w, now[size_t(r)]);
        out[size_t(r)].push_back(w);
        progressed = true;
        break;
      }
      if (!at) continue;
      now[size_t(r)] = start + replay.cost(a.op);
      replay.finish(a, now[size_t(r)]);
      out[size_t(r)].push_back(a);
      if (a.op == PipeOp::backward_input)
        queue.push_back({PipeOp::backward_weight, a.micro_batch, a.stage});
      next[size_t(r)] += 1;
      progressed = true;
      break;
    }
    if (all_done) break;
    ST_CHECK(progressed, "zero-bubble schedule: the 1F1B order deadlocks");
  }
  for (int r = 0; r < p.ranks; ++r)
    for (const PipeAction& w : pending[size_t(r)]) out[size_t(r)].push_back(w);
  return out;
}

}  // namespace

PipelineSchedule::PipelineSchedule(PipeSchedule kind, PipeShape shape)
    : kind_(kind), shape_(shape) {
  const char* name = pipe_schedule_name(kind);
  if (shape.ranks < 1) fail_input("parallel.pp = {} must be >= 1", shape.ranks);
  if (shape.micro_batches < 1)
    fail_input("training.micro_batches = {} must be >= 1", shape.micro_batches);
  if (kind == PipeSchedule::interleaved_1f1b) {
    if (shape.virtual_stages < 2)
      fail_input(
          "parallel.pp_virtual_stages = {}: interleaved_1f1b needs at least 2 stages per "
          "rank (1 is plain 1f1b)",
          shape.virtual_stages);
    if (shape.micro_batches % shape.ranks != 0)
      fail_input(
          "training.micro_batches = {}: interleaved_1f1b takes the micro-batches in groups "
          "of parallel.pp = {}, so it must be a multiple of it",
          shape.micro_batches, shape.ranks);
  } else if (shape.virtual_stages != 1) {
    fail_input(
        "parallel.pp_virtual_stages = {}: the {} schedule runs one stage per rank (1); "
        "interleaved_1f1b runs several",
        shape.virtual_stages, name);
  }
  actions_.resize(size_t(shape.ranks));
  if (kind == PipeSchedule::zero_bubble) {
    actions_ = zero_bubble_orders(*this);
    return;
  }
  for (int r = 0; r < shape.ranks; ++r)
    actions_[size_t(r)] = kind == PipeSchedule::gpipe
                              ? gpipe_order(shape, r)
                              : one_f_one_b_order(shape, r, PipeOp::backward);
}

double PipelineSchedule::theoretical_bubble(double f, double b, double w) const {
  const double P = shape_.ranks, M = shape_.micro_batches, V = shape_.virtual_stages;
  const double work = V * M * (f + b + w);  // a rank's compute in a step
  double idle = (P - 1) * (f + b + w);      // the fill and drain of one stage's time
  // ZB-H1: the drain's waits (P - 1 of them, F + B each) are filled with weight gradients,
  // one each, as far as there are deferred ones: (P-1)(F+B-W) once M >= P.
  if (kind_ == PipeSchedule::zero_bubble)
    idle = std::max(0.0, (P - 1) * (f + b) - w * std::min(P - 1, M - 1));
  return idle / (work + idle);
}

std::string PipelineSchedule::describe() const {
  const std::string stages =
      shape_.virtual_stages > 1 ? fmt::format(" x {} stages each", shape_.virtual_stages) : "";
  return fmt::format(
      "{} over {} ranks{}, {} micro-batches: bubble {:.1f}% in theory (equal "
      "forward, input- and weight-gradient times)",
      pipe_schedule_name(kind_), shape_.ranks, stages, shape_.micro_batches,
      100 * theoretical_bubble(1, 1, 1));
}

double PipeTimeline::bubble() const {
  if (busy.empty() || makespan <= 0) return 0;
  double sum = 0;
  for (double b : busy) sum += b;
  return 1 - sum / double(busy.size()) / makespan;
}

PipeTimeline simulate_pipeline(const PipelineSchedule& s, const PipeCosts& costs) {
  const int P = s.shape().ranks;
  Replay replay(s, costs);
  PipeTimeline t;
  t.busy.assign(size_t(P), 0);
  t.peak_inflight.assign(size_t(P), 0);
  std::vector<size_t> next(size_t(P), 0);
  std::vector<double> now(size_t(P), 0);
  std::vector<int> inflight(size_t(P), 0);
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (int r = 0; r < P; ++r) {
      const auto& actions = s.actions(r);
      // Run this rank's actions while their inputs are known.
      while (next[size_t(r)] < actions.size()) {
        const PipeAction& a = actions[next[size_t(r)]];
        const std::optional<double> at = replay.ready(a);
        if (!at) break;
        const double cost = replay.cost(a.op);
        now[size_t(r)] = std::max(now[size_t(r)], *at) + cost;
        t.busy[size_t(r)] += cost;
        replay.finish(a, now[size_t(r)]);
        // A micro-batch holds its activations from its forward to its weight gradient.
        if (a.op == PipeOp::forward) inflight[size_t(r)] += 1;
        if (a.op == PipeOp::backward || a.op == PipeOp::backward_weight) inflight[size_t(r)] -= 1;
        t.peak_inflight[size_t(r)] = std::max(t.peak_inflight[size_t(r)], inflight[size_t(r)]);
        next[size_t(r)] += 1;
        progressed = true;
      }
    }
  }
  for (int r = 0; r < P; ++r)
    if (next[size_t(r)] < s.actions(r).size()) {
      const PipeAction& a = s.actions(r)[next[size_t(r)]];
      fail(
          "pipeline schedule {}: deadlock: rank {} waits at {}{} of stage {} for an input no "
          "rank computes",
          pipe_schedule_name(s.kind()), r, pipe_op_name(a.op), a.micro_batch, a.stage);
    }
  replay.check_complete();
  t.makespan = *std::max_element(now.begin(), now.end());
  return t;
}

}  // namespace st
