#pragma once
// The interface every trainable model offers to trainers and sharders: parameter specs grouped
// into units, forward/backward of a micro-batch, and hooks around each unit's work.
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/data/batch.hpp"
#include "core/model/param_spec.hpp"

namespace st {

class TensorParallel;  // core/model/tensor_parallel.hpp

// Called by models around each unit's work, so a sharder can gather and free parameters.
// The order is the unit topology the sharder states and checks (parallel/fsdp/unit_topology.hpp):
// root unit 0 is entered first and left last; block units 1..n-1 are entered in order for the
// forward and in reverse for the backward.
class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  virtual void before_forward(int /*unit*/) {}
  virtual void after_forward(int /*unit*/) {}
  virtual void before_backward(int /*unit*/) {}
  virtual void after_backward(int /*unit*/) {}
};

// What a model keeps from forward for backward (sharding.activation_checkpointing):
//   none:      everything its backward reads;
//   selective: matmul outputs and the residual stream; the cheap ops (layer norm, GELU, the
//              attention core's softmax) run again in backward;
//   full:      only each block's input; the whole block runs again in backward.
enum class ActivationCheckpointing { none, selective, full };
const char* activation_checkpointing_name(ActivationCheckpointing mode);

// A parameter as the model sees it during compute: its value in the compute dtype and its
// FP32 gradient accumulator. Whoever owns the memory binds these before the unit runs.
struct BoundParam {
  Tensor value;
  Tensor grad;
};

// What one micro-batch costs, by segment of the step's schedule (the simulator's compute model
// scales measured rates by it): matmul FLOPs, and elementwise bytes (an estimate of the memory
// traffic of norms, activations, softmax, losses, residuals, casts). The root unit's work is
// split where the blocks interrupt it: embedding before them, head and loss after them
// (forward); head and loss before them, embedding after them (backward).
// Under tensor parallelism a segment also runs collectives over the TP group, each blocking
// the compute (GroupTensorParallel): their kind and the whole buffer's bytes (the gathered
// output of an all-gather, the input of a reduce-scatter), in the order the segment issues them.
enum class TpOp { all_gather, reduce_scatter, all_reduce };
struct TpCollective {
  TpOp op = TpOp::all_reduce;
  double bytes = 0;
  bool operator==(const TpCollective&) const = default;
};
struct SegmentWork {
  SegmentWork() = default;
  SegmentWork(double flops_, double bytes_) : flops(flops_), bytes(bytes_) {}
  double flops = 0, bytes = 0;
  std::vector<TpCollective> tp;  // empty without tensor parallelism
};
struct ModelWork {
  SegmentWork root_forward_pre, root_forward_post, root_backward_pre, root_backward_post;
  SegmentWork block_forward, block_backward;  // each block, recomputation included
  double total_flops(int64_t blocks) const;
  double total_bytes(int64_t blocks) const;
};

// The FP32 logits of a model's last forward: rows `row_stride` floats apart, the first `vocab`
// columns of each real (the rest pad the vocabulary).
struct LogitsView {
  const float* data = nullptr;
  int64_t row_stride = 0, vocab = 0;
  const float* row(int64_t i) const { return data + i * row_stride; }
};

// Rows of a token embedding and columns of the logits for a vocabulary of `vocab`: `padded`
// when it is set (> 0), else `vocab` rounded up to a multiple of 128, so matmuls stay aligned
// (llm.c pads GPT-2's 50,257 to 50,304). Padding never reaches the loss, a sample or an export.
constexpr int64_t kVocabAlignment = 128;
constexpr int64_t padded_vocab(int64_t vocab, int64_t padded) {
  return padded > 0 ? padded : (vocab + kVocabAlignment - 1) / kVocabAlignment * kVocabAlignment;
}

// A batch of token ids for a model of context `block_size` (`model` names it in errors):
// inputs and targets both [B, T], T within the context.
void check_token_batch(const Batch& batch, int64_t block_size, const char* model);

// A pipeline stage's part of a model (parallel/pipeline): blocks [first, end), the embedding
// on the first stage, the final norm, head and loss on the last.
struct StageBlocks {
  int64_t first = 0, end = 0;
  bool first_stage = false, last_stage = false;
  bool operator==(const StageBlocks&) const = default;
};

// The interface every trainable model offers to trainers and sharders.
class Model {
 public:
  virtual ~Model() = default;
  virtual const std::vector<ParamSpec>& param_specs() const = 0;
  virtual int num_units() const = 0;
  virtual DType compute_dtype() const = 0;

  // Forward and backward of one micro-batch. Gradients are added into the bound grads, scaled
  // by `grad_scale` (1 / tokens in the global step). Returns the sum of the token losses.
  virtual double forward_backward(const Batch& batch, float grad_scale, UnitHooks& hooks) = 0;
  // Forward only; returns the sum of the token losses.
  virtual double forward_loss(const Batch& batch, UnitHooks& hooks) = 0;
  // Matmul FLOPs of one forward+backward over one token (for MFU).
  virtual double flops_per_token() const = 0;
  // {M, K, N} of the largest matmul a micro-batch of `tokens` runs ({0, 0, 0}: none stated),
  // one of the shapes the MFU's peak is measured at.
  virtual std::array<int64_t, 3> largest_matmul(int64_t /*tokens*/) const { return {0, 0, 0}; }
  // The work of one micro-batch of [B, T] by segment, with the current activation
  // checkpointing (the default fails naming the model: it cannot be simulated).
  virtual ModelWork work(int64_t B, int64_t T) const;
  // Bytes of activations and scratch one micro-batch of [B, T] keeps (for memory budgets),
  // with the current activation checkpointing.
  virtual int64_t activation_bytes(int64_t B, int64_t T) const = 0;
  // Models made of blocks (core/model/block_model.hpp) support every mode; others only none
  // (anything else is an InputError naming the model).
  virtual void set_activation_checkpointing(ActivationCheckpointing mode);
  // One line for people ("GPT L=4 C=256 ..."), and the shape hyper-parameters by name for
  // checkpoint manifests (a checkpoint loads only into a model with the same ones).
  virtual std::string describe() const = 0;
  virtual std::vector<std::pair<std::string, int64_t>> hyperparameters() const = 0;
  // The logits of the last forward, for sampling (a language model keeps them; the default
  // fails naming the model).
  virtual LogitsView last_logits() const;
  // The tensor-parallel group's collectives, for a model built as one rank's slices
  // (core/model/param_slice.hpp); set before its first forward. The default fails naming the
  // model unless the group is one rank.
  virtual void set_tensor_parallel(TensorParallel* tp);
  // Parameters every TP rank holds whole but computes only part of the gradient of (its rows
  // under sequence parallelism: the norms; its heads: Qwen3's q/k norms). The runtime sums
  // their gradients over the TP group once a step, after FSDP's reductions (TpGradientSums:
  // Megatron's sum of sequence-parallel gradients); none without TP.
  virtual std::vector<size_t> tp_partial_grads() const { return {}; }

  // Pipeline parallelism, for models made of blocks (DecoderModel; the defaults fail naming the
  // model). Parameters are bound before and stay bound; no unit hooks run. Each micro-batch
  // `micro` of stage `stage` keeps its own activations from its forward to its backward (or
  // stage_discard), so several are in flight at once.
  // The residual stream one stage hands the next for a [B, T] micro-batch: rows x width
  // elements (this TP rank's rows under sequence parallelism).
  virtual int64_t stage_boundary_numel(int64_t B, int64_t T) const;
  // Forward of `batch` through `blocks`: the first stage embeds its tokens, the others read
  // `input` (the previous stage's output, FP32 or BF16); a last stage returns the sum of the
  // token losses, the others write their output into `output` (in its dtype) and return 0.
  virtual double stage_forward(int stage, const StageBlocks& blocks, int micro, const Batch& batch,
                               const Tensor& input, const Tensor& output);
  // Its backward: the last stage starts from the loss (gradients scaled by `grad_scale`), the
  // others from `d_output` (the next stage's input gradient); the first stage ends in the
  // embedding's gradients, the others write their input gradient into `d_input`. Frees the
  // micro-batch's activations.
  virtual void stage_backward(int stage, const StageBlocks& blocks, int micro, const Batch& batch,
                              float grad_scale, const Tensor& d_output, const Tensor& d_input);
  // Frees a forward-only micro-batch's activations (evaluation).
  virtual void stage_discard(int stage, int micro);
  // Bytes one micro-batch of [B, T] keeps through `blocks` (activation_bytes by default).
  virtual int64_t stage_activation_bytes(int64_t B, int64_t T, const StageBlocks&) const {
    return activation_bytes(B, T);
  }
  // The FSDP unit of block `l` (unit 0 is the root: embedding, final norm, head).
  virtual int unit_of_block(int64_t l) const { return int(l) + 1; }
  // Blocks between the root's two halves (0: not made of blocks, no pipeline).
  virtual int64_t pipeline_blocks() const { return 0; }

  // `grad` may be left undefined for forward-only use (touching it is then an error).
  void bind(size_t index, Tensor value, Tensor grad);
  // Forgets the memory of parameter `index` (a sharder freeing its unsharded buffer), so a
  // use after the free is an error naming the parameter instead of a read of reused memory.
  void unbind(size_t index);
  const BoundParam& param(size_t index) const;

 protected:
  std::vector<BoundParam> bound_;
};

}  // namespace st
