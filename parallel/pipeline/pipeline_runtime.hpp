#pragma once
// Pipeline parallelism's executor: runs this pipeline rank's list of a PipelineSchedule
// (parallel/pipeline/schedule.hpp) on the model's stages (Model's stage API), moving each
// micro-batch's residual stream forward and its gradient back between the stages' ranks over the
// pipeline group's send/recv. Each receive is posted a few actions before the one that reads it,
// so a message lands while the rank computes; sends return at once. What FSDP does around it (the
// stages' units gathered once a step and kept) is the caller's (ShardedModel).
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "collectives/process_group.hpp"
#include "core/data/batch.hpp"
#include "core/model/model.hpp"
#include "core/ops/weight_grad.hpp"
#include "parallel/pipeline/schedule.hpp"
#include "parallel/pipeline/stage_partition.hpp"

namespace st {

// The message tag of a micro-batch's activation (gradient = false) into `stage`, or of its
// gradient back into `stage`: one per direction, receiving stage and micro-batch. The runtime
// and the simulator's replay both use it.
inline int64_t pipeline_message_tag(bool gradient, int stage, int micro, int stages,
                                    int micro_batches) {
  return (int64_t(gradient) * stages + stage) * micro_batches + micro;
}
// Receives are posted this many actions ahead of the one that reads them (runtime and replay).
inline constexpr size_t kPipelineReceivesAhead = 2;

struct PipelineOptions {
  PipeSchedule schedule = PipeSchedule::one_f_one_b;
  int virtual_stages = 1;  // V: stages per pipeline rank
  // Blocks per stage (P·V numbers summing to the model's blocks), or empty: balanced by the
  // blocks' FLOPs, the embedding's and the head's counted on the end stages (balance_stages).
  std::vector<int> layers = {};
  // What the residual stream and its gradient cross between stages in: the stream's own FP32
  // (Megatron's rule: its p2p carries the residual's dtype, FP32 under
  // --fp32-residual-connection), or BF16 for half the bytes and one more rounding a boundary.
  DType wire_dtype = DType::f32;
  double timeout_s = kDefaultTimeoutS;
};

// One step's time on this rank: its stages' compute, and the time it waited for a
// neighbour's activation or gradient (the bubble, as this rank lived it).
struct PipelineStats {
  double compute_ms = 0, wait_ms = 0, step_ms = 0;
  int64_t sent_bytes = 0, received_bytes = 0;
  int64_t deferred_bytes = 0;  // zero bubble: the most the deferred weight halves held at once
  double bubble() const { return step_ms > 0 ? 1.0 - compute_ms / step_ms : 0.0; }
};

// The stages' split of `model`'s blocks for P pipeline ranks: options.layers, or balanced by
// FLOPs (the model's work at one sequence of `seq_len`). Exit 2 naming the key when it cannot.
std::vector<StageRange> pipeline_split(const Model& model, int ranks,
                                       const PipelineOptions& options, int64_t seq_len);

// The FSDP units pipeline rank `rank` of `ranks` holds under `split` (its stages rank, rank + P,
// ...): their blocks', and the root unit (embedding, head) on the first and the last rank.
std::vector<int> pipeline_held_units(const Model& model, const std::vector<StageRange>& split,
                                     int ranks, int rank);
// Stage `stage` of `split` as the model runs it.
StageBlocks stage_blocks(const std::vector<StageRange>& split, int stage);

class PipelineRuntime {
 public:
  // `pipeline`: the ranks holding the same place in every stage (DeviceMesh::pipeline_group).
  PipelineRuntime(Model& model, ProcessGroup& pipeline, PipelineOptions options,
                  std::vector<StageRange> split);

  int ranks() const { return ranks_; }
  int stages() const { return int(split_.size()); }
  const std::vector<StageRange>& split() const { return split_; }
  const PipelineOptions& options() const { return options_; }
  // This rank's stages (rank r holds r, r + P, ...), and the FSDP units they hold: their
  // blocks', and the root unit (embedding, head) on the first and the last rank.
  std::vector<int> my_stages() const;
  std::vector<int> held_units() const;
  bool holds_first_stage() const { return rank_ == 0; }
  bool holds_last_stage() const { return rank_ == ranks_ - 1; }
  StageBlocks blocks(int stage) const;
  // The pipeline rank whose stage holds FSDP unit `unit` (the root: the first).
  int rank_of_unit(int unit) const;
  // The schedule of a step of `micro_batches` (refused by key when it cannot run them).
  const PipelineSchedule& schedule(int micro_batches);

  // Collective over the pipeline group. One step: forward and backward of every micro-batch
  // through this rank's stages in the schedule's order, gradients added into the bound FP32
  // gradients scaled by `grad_scale`. Returns the sum of the token losses on the last stage's
  // rank, 0 elsewhere.
  double train(const std::vector<Batch>& micro_batches, float grad_scale);
  // Collective. Forwards only (GPipe's order); the loss sum on the last stage's rank.
  double forward_only(const std::vector<Batch>& micro_batches);
  const PipelineStats& stats() const { return stats_; }

 private:
  enum Direction { activation = 0, gradient = 1 };
  using Key = std::tuple<int, int, int>;  // direction, receiving stage, micro-batch
  double run(const std::vector<PipeAction>& actions, const std::vector<Batch>& micro_batches,
             float grad_scale, bool backward);
  // One action's compute (its input received, its output to send: undefined where none);
  // returns its loss (a last stage's forward).
  double compute(const PipeAction& a, const Batch& batch, float grad_scale, bool backward,
                 const Tensor& in, const Tensor& out);
  // Posts the receive action `a` reads (if any).
  void post_receive(const PipeAction& a, const std::vector<Batch>& micro_batches);
  Tensor wire(const Batch& batch, const char* what) const;
  int64_t deferred_bytes() const;
  int tag(Direction d, int stage, int micro, int micro_batches) const;
  // Waits for the message of `key` (posted by post_receive) and returns its buffer.
  Tensor received(const Key& key);
  void send(Direction d, int to_stage, int micro, int micro_batches, Tensor buffer);

  Model& model_;
  ProcessGroup& group_;
  PipelineOptions options_;
  std::vector<StageRange> split_;
  int ranks_, rank_;
  std::optional<PipelineSchedule> schedule_;
  std::map<Key, std::pair<Tensor, std::shared_ptr<Work>>> receives_;
  std::vector<std::pair<Tensor, std::shared_ptr<Work>>> sends_;
  // Zero bubble: each backward's weight-gradient matmuls, from its input half to its weight half.
  std::map<std::pair<int, int>, DeferredWeightGrads> deferred_;  // by (stage, micro-batch)
  PipelineStats stats_;
};

}  // namespace st
