#include "parallel/pipeline/pipeline_runtime.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"
#include "core/op_profile.hpp"
#include "core/timer.hpp"
#include "core/trace.hpp"

namespace st {

std::vector<StageRange> pipeline_split(const Model& model, int ranks,
                                       const PipelineOptions& options, int64_t seq_len) {
  const int64_t blocks = model.pipeline_blocks();
  if (blocks <= 0)
    fail_input("parallel.pp = {}: {} is not made of blocks, so it has no pipeline stages", ranks,
               model.describe());
  const int stages = ranks * options.virtual_stages;
  if (!options.layers.empty()) return stages_from_layers(options.layers, int(blocks), stages);
  // Each block's forward and backward FLOPs; the embedding's and the head's (its matmul and the
  // loss) added to the end stages. Every block of a decoder costs the same, so this splits the
  // blocks evenly and gives the end stages fewer when the head is large.
  const ModelWork w = model.work(1, std::max<int64_t>(seq_len, 1));
  const double block = w.block_forward.flops + w.block_backward.flops;
  const double first = w.root_forward_pre.flops + w.root_backward_post.flops;
  const double last = w.root_forward_post.flops + w.root_backward_pre.flops;
  return balance_stages(std::vector<double>(size_t(blocks), block), first, last, stages);
}

PipelineRuntime::PipelineRuntime(Model& model, ProcessGroup& pipeline, PipelineOptions options,
                                 std::vector<StageRange> split)
    : model_(model),
      group_(pipeline),
      options_(std::move(options)),
      split_(std::move(split)),
      ranks_(pipeline.size()),
      rank_(pipeline.rank()) {
  ST_CHECK(int(split_.size()) == ranks_ * options_.virtual_stages,
           "{} stages for {} pipeline ranks x {} virtual stages", split_.size(), ranks_,
           options_.virtual_stages);
}

std::vector<int> PipelineRuntime::my_stages() const {
  std::vector<int> mine;
  for (int s = rank_; s < stages(); s += ranks_) mine.push_back(s);
  return mine;
}

std::vector<int> pipeline_held_units(const Model& model, const std::vector<StageRange>& split,
                                     int ranks, int rank) {
  std::vector<int> units;
  if (rank == 0 || rank == ranks - 1) units.push_back(0);
  for (size_t s = size_t(rank); s < split.size(); s += size_t(ranks))
    for (int l = split[s].first; l < split[s].end; ++l) units.push_back(model.unit_of_block(l));
  std::sort(units.begin(), units.end());
  units.erase(std::unique(units.begin(), units.end()), units.end());
  return units;
}

StageBlocks stage_blocks(const std::vector<StageRange>& split, int stage) {
  const StageRange& r = split[size_t(stage)];
  return {r.first, r.end, stage == 0, stage == int(split.size()) - 1};
}

std::vector<int> PipelineRuntime::held_units() const {
  return pipeline_held_units(model_, split_, ranks_, rank_);
}

int PipelineRuntime::rank_of_unit(int unit) const {
  for (int s = 0; s < stages(); ++s)
    for (int l = split_[size_t(s)].first; l < split_[size_t(s)].end; ++l)
      if (model_.unit_of_block(l) == unit) return s % ranks_;
  return 0;
}

StageBlocks PipelineRuntime::blocks(int stage) const {
  return stage_blocks(split_, stage);
}

const PipelineSchedule& PipelineRuntime::schedule(int micro_batches) {
  if (!schedule_ || schedule_->shape().micro_batches != micro_batches)
    schedule_.emplace(options_.schedule, PipeShape{ranks_, options_.virtual_stages, micro_batches});
  return *schedule_;
}

int PipelineRuntime::tag(Direction d, int stage, int micro, int micro_batches) const {
  const int64_t t = pipeline_message_tag(d == gradient, stage, micro, stages(), micro_batches);
  if (t > kMaxTag)
    fail_input(
        "training.micro_batches = {} with {} pipeline stages needs more message tags than MPI "
        "promises ({}): use fewer micro-batches or stages",
        micro_batches, stages(), kMaxTag);
  return int(t);
}

Tensor PipelineRuntime::wire(const Batch& batch, const char* what) const {
  return Tensor::empty(what, {model_.stage_boundary_numel(batch.B(), batch.T())},
                       options_.wire_dtype);
}

void PipelineRuntime::post_receive(const PipeAction& a, const std::vector<Batch>& micro_batches) {
  const bool forward = a.op == PipeOp::forward;
  if (a.op == PipeOp::backward_weight) return;
  if (forward ? a.stage == 0 : a.stage == stages() - 1) return;  // nothing comes in
  const Direction d = forward ? activation : gradient;
  const int from = forward ? a.stage - 1 : a.stage + 1;
  Tensor buffer = wire(micro_batches[size_t(a.micro_batch)],
                       forward ? "pipeline.activation_in" : "pipeline.gradient_in");
  const int M = int(micro_batches.size());
  auto work =
      group_.recv(buffer, from % ranks_, {tag(d, a.stage, a.micro_batch, M), options_.timeout_s});
  stats_.received_bytes += int64_t(buffer.nbytes());
  receives_[{d, a.stage, a.micro_batch}] = {std::move(buffer), std::move(work)};
}

Tensor PipelineRuntime::received(const Key& key) {
  auto it = receives_.find(key);
  ST_CHECK(it != receives_.end(), "pipeline: no receive posted for stage {} micro-batch {}",
           std::get<1>(key), std::get<2>(key));
  Work& work = *it->second.second;
  if (!work.is_completed()) {
    OpScope scope(OpKind::collective_wait);
    Timer waiting;
    work.wait();
    stats_.wait_ms += waiting.ms();
  }
  work.wait();  // rethrows a failure
  Tensor buffer = std::move(it->second.first);
  receives_.erase(it);
  return buffer;
}

void PipelineRuntime::send(Direction d, int to_stage, int micro, int micro_batches, Tensor buffer) {
  auto work = group_.send(buffer, to_stage % ranks_,
                          {tag(d, to_stage, micro, micro_batches), options_.timeout_s});
  stats_.sent_bytes += int64_t(buffer.nbytes());
  sends_.emplace_back(std::move(buffer), std::move(work));
  // Sends that are done free their buffers (a failed one reports here).
  std::erase_if(sends_, [](auto& s) {
    if (!s.second->is_completed()) return false;
    s.second->wait();
    return true;
  });
}

double PipelineRuntime::train(const std::vector<Batch>& micro_batches, float grad_scale) {
  return run(schedule(int(micro_batches.size())).actions(rank_), micro_batches, grad_scale, true);
}

double PipelineRuntime::forward_only(const std::vector<Batch>& micro_batches) {
  std::vector<PipeAction> actions;
  for (int s : my_stages())
    for (int m = 0; m < int(micro_batches.size()); ++m) actions.push_back({PipeOp::forward, m, s});
  // Stage by stage, each micro-batch in turn: GPipe's forward order.
  return run(actions, micro_batches, 0, false);
}

double PipelineRuntime::run(const std::vector<PipeAction>& actions,
                            const std::vector<Batch>& micro_batches, float grad_scale,
                            bool backward) {
  stats_ = {};
  Timer step;
  const int M = int(micro_batches.size()), last = stages() - 1;
  double loss = 0;
  TraceRecorder* trace = TraceRecorder::active();
  size_t posted = 0;
  for (size_t i = 0; i < actions.size(); ++i) {
    // Receives are posted kPipelineReceivesAhead actions ahead of the one that reads them: they
    // land while this rank computes, their buffers exist for a few actions only, and each one's
    // timeout (the stall detector's) counts from shortly before it is needed.
    for (; posted < actions.size() && posted <= i + kPipelineReceivesAhead; ++posted)
      post_receive(actions[posted], micro_batches);
    const PipeAction& a = actions[i];
    const Batch& batch = micro_batches[size_t(a.micro_batch)];
    const bool forward = a.op == PipeOp::forward, weight = a.op == PipeOp::backward_weight;
    // A forward reads the previous stage's output, a backward (or its input half) the next
    // stage's input gradient; a weight half reads nothing and sends nothing.
    Tensor in = !weight && (forward ? a.stage > 0 : a.stage < last)
                    ? received({forward ? activation : gradient, a.stage, a.micro_batch})
                    : Tensor();
    Timer clock;
    const double begin = trace ? trace_now_us() : 0;
    Tensor out = !weight && (forward ? a.stage < last : a.stage > 0)
                     ? wire(batch, forward ? "pipeline.activation_out" : "pipeline.gradient_out")
                     : Tensor();
    loss += compute(a, batch, grad_scale, backward, in, out);
    stats_.compute_ms += clock.ms();
    if (trace)
      trace->add(
          fmt::format("{} stage {} micro-batch {}", pipe_op_name(a.op), a.stage, a.micro_batch),
          TraceTrack::compute, begin, trace_now_us());
    if (out.defined())
      send(forward ? activation : gradient, forward ? a.stage + 1 : a.stage - 1, a.micro_batch, M,
           std::move(out));
  }
  for (auto& [buffer, work] : sends_) work->wait();
  sends_.clear();
  ST_CHECK(deferred_.empty(), "pipeline: a weight gradient was deferred and never computed");
  stats_.step_ms = step.ms();
  return loss;
}

double PipelineRuntime::compute(const PipeAction& a, const Batch& batch, float grad_scale,
                                bool backward, const Tensor& in, const Tensor& out) {
  const StageBlocks b = blocks(a.stage);
  switch (a.op) {
    case PipeOp::forward: {
      const double loss = model_.stage_forward(a.stage, b, a.micro_batch, batch, in, out);
      if (!backward) model_.stage_discard(a.stage, a.micro_batch);
      return loss;
    }
    case PipeOp::backward:
      model_.stage_backward(a.stage, b, a.micro_batch, batch, grad_scale, in, out);
      return 0;
    case PipeOp::backward_input: {
      DeferWeightGrads defer(deferred_[{a.stage, a.micro_batch}]);
      model_.stage_backward(a.stage, b, a.micro_batch, batch, grad_scale, in, out);
      stats_.deferred_bytes = std::max(stats_.deferred_bytes, deferred_bytes());
      return 0;
    }
    case PipeOp::backward_weight: {
      const auto it = deferred_.find({a.stage, a.micro_batch});
      ST_CHECK(it != deferred_.end(), "pipeline: stage {} micro-batch {}'s weight half first",
               a.stage, a.micro_batch);
      it->second.run();
      deferred_.erase(it);
      return 0;
    }
  }
  return 0;
}

int64_t PipelineRuntime::deferred_bytes() const {
  int64_t bytes = 0;
  for (const auto& [key, d] : deferred_) bytes += d.bytes();
  return bytes;
}

}  // namespace st
