#pragma once
// What GPT-2 and Llama share, and every decoder-only family after them: the config and compute
// dtype, the parameter specs with the accessors the compute code finds parameters through, one
// activation set (rebuilt when the batch shape or the checkpointing mode changes; counted on
// the meta device for budgets), the logits of the last forward, and the root unit's work around
// the blocks: embedding, blocks, head forward; head, blocks, embedding backward.
//
// A family derives from DecoderModel<ItsConfig, ItsActivations> and supplies the blocks
// (BlockModel) and the four root pieces. ItsConfig has n_layer, n_embd, block_size, vocab_size
// and padded_vocab(); ItsActivations is constructed as (config, dtype, B, T, mode, slice,
// device) and has B, T, mode, arena and logits; `slice` is the model's TpSlice (its widths are
// one tensor-parallel rank's slices', its residual stream one rank's rows under sequence
// parallelism). The member definitions are in decoder_model_impl.hpp, which
// the family's .cpp includes and instantiates (`template class DecoderModel<...>`) once its
// activations are complete.
#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "core/model/block_model.hpp"
#include "core/model/param_slice.hpp"
#include "core/ops/lm_head.hpp"
#include "core/ops/matmul.hpp"
#include "core/ops/vocab_parallel_loss.hpp"

namespace st {

template <class Config, class Acts>
class DecoderModel : public BlockModel {
 public:
  ~DecoderModel() override;

  const Config& config() const { return config_; }
  const std::vector<ParamSpec>& param_specs() const override { return specs_; }
  int num_units() const override { return int(config_.n_layer) + 1; }
  DType compute_dtype() const override { return dtype_; }

  double forward_loss(const Batch& batch, UnitHooks& hooks) override;
  double forward_backward(const Batch& batch, float grad_scale, UnitHooks& hooks) override;
  // Counted on the meta device: the same layout, no memory.
  int64_t activation_bytes_for(int64_t B, int64_t T, ActivationCheckpointing mode) const override;
  // [B*T, padded V] (FP32): row stride padded_vocab(), the first vocab_size columns real.
  LogitsView last_logits() const override;
  // Checks that the group is the one this model's slices were built for.
  void set_tensor_parallel(TensorParallel* tp) override;
  std::vector<size_t> tp_partial_grads() const override;
  const TpSlice& tp_slice() const { return tp_slice_; }

  // Pipeline stages (Model's stage API): each in-flight micro-batch's activations are a set of
  // the stage's blocks alone, reused by later micro-batches of the same shape.
  int64_t stage_boundary_numel(int64_t B, int64_t T) const override;
  double stage_forward(int stage, const StageBlocks& blocks, int micro, const Batch& batch,
                       const Tensor& input, const Tensor& output) override;
  void stage_backward(int stage, const StageBlocks& blocks, int micro, const Batch& batch,
                      float grad_scale, const Tensor& d_output, const Tensor& d_input) override;
  void stage_discard(int stage, int micro) override;
  int64_t stage_activation_bytes(int64_t B, int64_t T, const StageBlocks& blocks) const override;
  int64_t pipeline_blocks() const override { return config_.n_layer; }

 protected:
  // `name` ("GPT", "Llama") in messages; `slice`: the tensor-parallel slices it is built of.
  DecoderModel(const Config& config, DType compute_dtype, const char* name, TpSlice slice = {});
  bool tensor_parallel() const { return tp_slice_.ranks > 1; }
  // The group's collectives (set_tensor_parallel's; fails when unset).
  TensorParallel& tp() const;

  // Sequence parallelism (Megatron's, with tensor parallelism): the residual stream, its norms
  // and residual adds hold this rank's run of a.rows = B·T / tp rows (DecoderActivations::rows);
  // the blocks' matmuls and attention see all B·T rows.
  bool sequence_parallel() const { return tensor_parallel() && tp_slice_.sequence_parallel; }
  // Where a norm feeding a column-parallel block writes its a.rows rows: `whole` [B·T, C], or
  // under sequence parallelism this rank's slot of it, which gather_rows then fills in from
  // every rank's slot (an all-gather in the compute dtype; nothing without it).
  void* norm_rows(const Acts& a, const Tensor& whole) const;
  void gather_rows(const Acts& a, const Tensor& whole);
  // The residual stream's gradient over all B·T rows, as a row-parallel projection's backward
  // reads it: a.dx, or under sequence parallelism every rank's rows gathered (FP32) in a.tp_sum.
  const float* whole_residual_grad(Acts& a);
  // The norms' weights and biases (each TP rank's rows give part of their gradients under
  // sequence parallelism) and the parameters each rank's heads give part of the gradient of
  // (Qwen3's q/k norms), which each family lists as it declares them: tp_partial_grads().
  std::vector<size_t> norm_params_, head_partial_params_;

  // Tensor parallelism's steps every family takes alike (Megatron's layout; used only when
  // tensor_parallel()):
  // The vocabulary rows (of the embedding and head) and logit columns this rank holds.
  VocabSlice vocab() const;
  // out_x = x_in + in[M, K] · weight[K, C] (+ bias, added by TP rank 0 alone) for a
  // row-parallel projection back to the residual stream (M = B·T): each rank's product is a
  // partial sum, summed over the group in FP32 before the residual add (all-reduced; under
  // sequence parallelism reduce-scattered to this rank's a.rows rows of out_x and x_in).
  void row_parallel_residual(float* out_x, const float* x_in, const void* in, int64_t M, int64_t K,
                             const MatView& weight, const void* bias);
  // After a column-parallel layer's backward: each rank's input gradient [B·T, C] (the first
  // B·T·C elements of d_in) is a partial sum over its columns; sums it over the group and
  // returns the rows of the sum the norm before that layer reads in its backward: all of them
  // (in d_in), or under sequence parallelism this rank's a.rows (reduce-scattered to a.sp_rows).
  const float* sum_input_grad(Acts& a, const Tensor& d_in);
  // The vocabulary-parallel embedding of batch's tokens into a.x[0] (each token's row from the
  // rank that holds it; plus the position embedding `positions` [T, C] unless null), its
  // backward into g(embed) (and d_positions), the head's logits over this rank's columns and
  // the loss, and the head's backward into a.d_small, summed over the group (returns the rows
  // the final norm's backward reads, as sum_input_grad).
  void vocab_parallel_embed_forward(Acts& a, const Batch& batch, size_t embed,
                                    const void* positions);
  void vocab_parallel_embed_backward(Acts& a, const Batch& batch, size_t embed, float* d_positions);
  double vocab_parallel_head_forward(Acts& a, const Batch& batch, const void* normed, size_t head);
  const float* vocab_parallel_head_backward(Acts& a, const Batch& batch, float grad_scale,
                                            const void* normed, size_t head, void* cast_scratch);
  // A family's work (the whole model's, ModelWork) as this rank does it under tensor
  // parallelism: every segment's FLOPs and bytes over the group's ranks (Megatron's layout splits
  // each matmul, the heads and the vocabulary; sequence parallelism the rows of the rest, which
  // without it are counted divided as well: an underestimate), and the collectives the steps
  // above issue, in order (the partial gradients' once-a-step sum is the runtime's, not a
  // segment's: TpGradientSums).
  void add_tp_work(ModelWork& w, int64_t B, int64_t T) const;

  // The activation set for a [B, T] batch (the current one when the shape and mode match).
  Acts& activations_for(int64_t B, int64_t T);
  // A new activation set for `blocks` (the current checkpointing mode).
  std::unique_ptr<Acts> make_activations(int64_t B, int64_t T, const StageBlocks& blocks);
  StageBlocks whole_model() const { return {0, config_.n_layer, true, true}; }
  // A token batch this model can run (context, and sequence parallelism's split).
  void check_batch(const Batch& batch) const;
  // The compute-dtype value and the FP32 gradient of parameter `index`.
  const void* w(size_t index) const { return param(index).value.raw(); }
  float* g(size_t index) const { return param(index).grad.template data<float>(); }
  int64_t num_blocks() const override { return config_.n_layer; }
  LmHeadShape head_shape(const Acts& a) const;
  // Declares a parameter (in the family's Hugging Face naming) and returns its index. Its FSDP
  // unit and placement are the family's parallelize plan's, not the model code's.
  size_t add_param(std::string name, Shape shape, InitKind init, float init_std,
                   bool weight_decay) {
    specs_.push_back({std::move(name), std::move(shape), init, init_std, weight_decay});
    return specs_.size() - 1;
  }

  // The root unit: the embedding into the first residual stream, the head's logits and
  // per-token losses (returns their sum), the gradient through the head into the residual
  // stream's gradient, and the embedding's gradients.
  virtual void embed_forward(Acts& a, const Batch& batch) = 0;
  virtual double head_forward(Acts& a, const Batch& batch) = 0;
  virtual void head_backward(Acts& a, const Batch& batch, float grad_scale) = 0;
  virtual void embed_backward(Acts& a, const Batch& batch) = 0;

  Config config_;
  DType dtype_;
  std::vector<ParamSpec> specs_;
  Acts* acts_ = nullptr;  // the set the running forward or backward uses
  TpSlice tp_slice_;

 private:
  const char* name_;
  TensorParallel* tp_ = nullptr;
  std::unique_ptr<Acts> whole_;  // forward_loss's and forward_backward's set
  // Pipeline stages': in flight by (stage, micro-batch), and finished ones kept for reuse.
  std::map<std::pair<int, int>, std::unique_ptr<Acts>> in_flight_;
  std::vector<std::unique_ptr<Acts>> spare_;
  Acts& stage_activations(int stage, int micro, const StageBlocks& blocks, int64_t B, int64_t T);
  Acts& in_flight(int stage, int micro);
  void retire(int stage, int micro);
};

}  // namespace st
