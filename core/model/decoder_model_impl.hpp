#pragma once
// DecoderModel's member definitions (see decoder_model.hpp): included by a family's .cpp once
// its activations type is complete, then instantiated there.
#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"
#include "core/model/decoder_model.hpp"
#include "core/model/tensor_parallel.hpp"
#include "core/ops/cross_entropy.hpp"
#include "core/ops/elementwise.hpp"
#include "core/ops/embedding.hpp"
#include "core/ops/linear.hpp"
#include "core/ops/matmul.hpp"
#include "core/ops/vocab_parallel_loss.hpp"

namespace st {

template <class Config, class Acts>
DecoderModel<Config, Acts>::DecoderModel(const Config& config, DType compute_dtype,
                                         const char* name, TpSlice slice)
    : config_(config), dtype_(compute_dtype), tp_slice_(slice), name_(name) {
  ST_CHECK(slice.ranks >= 1 && slice.rank >= 0 && slice.rank < slice.ranks,
           "{}: tensor-parallel rank {} of {}", name, slice.rank, slice.ranks);
}

template <class Config, class Acts>
void DecoderModel<Config, Acts>::set_tensor_parallel(TensorParallel* tp) {
  const int size = tp ? tp->size() : 1, rank = tp ? tp->rank() : 0;
  if (size != tp_slice_.ranks || rank != tp_slice_.rank)
    fail("{}: built as tensor-parallel rank {} of {}, given a group where it is rank {} of {}",
         name_, tp_slice_.rank, tp_slice_.ranks, rank, size);
  tp_ = tp;
}

template <class Config, class Acts>
TensorParallel& DecoderModel<Config, Acts>::tp() const {
  if (!tp_) fail("{}: tensor-parallel slices computed before set_tensor_parallel", name_);
  return *tp_;
}

template <class Config, class Acts>
VocabSlice DecoderModel<Config, Acts>::vocab() const {
  return vocab_slice(config_.vocab_size, config_.padded_vocab(), tp_slice_.rank, tp_slice_.ranks);
}

template <class Config, class Acts>
void* DecoderModel<Config, Acts>::norm_rows(const Acts& a, const Tensor& whole) const {
  if (!sequence_parallel()) return whole.raw();
  return static_cast<char*>(whole.raw()) +
         tp_slice_.rank * a.rows * config_.n_embd * int64_t(dtype_size(whole.dtype()));
}

template <class Config, class Acts>
void DecoderModel<Config, Acts>::gather_rows(const Acts& a, const Tensor& whole) {
  if (!sequence_parallel()) return;
  const Tensor flat = whole.view({whole.numel()});
  const int64_t n = a.rows * config_.n_embd;
  tp().all_gather(flat.slice(tp_slice_.rank * n, (tp_slice_.rank + 1) * n), flat);  // in place
}

template <class Config, class Acts>
const float* DecoderModel<Config, Acts>::whole_residual_grad(Acts& a) {
  if (!sequence_parallel()) return a.dx.template data<float>();
  tp().all_gather(a.dx, a.tp_sum);
  return a.tp_sum.template data<float>();
}

template <class Config, class Acts>
std::vector<size_t> DecoderModel<Config, Acts>::tp_partial_grads() const {
  std::vector<size_t> params;
  if (sequence_parallel()) params = norm_params_;
  if (tensor_parallel())
    params.insert(params.end(), head_partial_params_.begin(), head_partial_params_.end());
  return params;
}

template <class Config, class Acts>
void DecoderModel<Config, Acts>::row_parallel_residual(float* out_x, const float* x_in,
                                                       const void* in, int64_t M, int64_t K,
                                                       const MatView& weight, const void* bias) {
  Acts& a = *acts_;
  const int64_t C = config_.n_embd;
  GemmOptions options;
  if (bias && tp_slice_.rank == 0) options.bias = bias, options.bias_dtype = dtype_;
  gemm(1, MatView::row_major(in, dtype_, M, K), weight,
       MatView::row_major(a.tp_sum.raw(), DType::f32, M, C), options);
  if (sequence_parallel()) {
    tp().reduce_scatter_sum(a.tp_sum, a.sp_rows);
    residual_add(out_x, x_in, a.sp_rows.raw(), DType::f32, size_t(a.rows * C));
    return;
  }
  tp().all_reduce_sum(a.tp_sum);
  residual_add(out_x, x_in, a.tp_sum.raw(), DType::f32, size_t(M * C));
}

template <class Config, class Acts>
const float* DecoderModel<Config, Acts>::sum_input_grad(Acts& a, const Tensor& d_in) {
  const Tensor partial = d_in.view({d_in.numel()}).slice(0, a.B * a.T * config_.n_embd);
  if (sequence_parallel()) {
    tp().reduce_scatter_sum(partial, a.sp_rows);
    return a.sp_rows.template data<float>();
  }
  tp().all_reduce_sum(partial);
  return partial.template data<float>();
}

template <class Config, class Acts>
void DecoderModel<Config, Acts>::vocab_parallel_embed_forward(Acts& a, const Batch& batch,
                                                              size_t embed, const void* positions) {
  const VocabSlice v = vocab();
  const int64_t C = config_.n_embd;
  // Under sequence parallelism the whole rows' partial sums go to a.tp_sum, then this rank's
  // rows of their sum to a.x[0]; without it the sum stays in a.x[0].
  const Tensor& sums = sequence_parallel() ? a.tp_sum : a.x[0];
  float* partial = sums.template data<float>();
  embedding_forward_slice(partial, batch.inputs.data<int32_t>(), w(embed), v.first, v.cols, a.B,
                          a.T, C, config_.vocab_size, dtype_);
  if (!sequence_parallel()) {
    tp().all_reduce_sum(sums);
    if (positions) add_position_embedding(partial, positions, a.B, a.T, C, dtype_);
    return;
  }
  // Each token's row comes from one rank and the others add zeros, so rank 0 adding the
  // positions before the sum gives every row the same bits as adding them after it.
  if (positions && tp_slice_.rank == 0)
    add_position_embedding(partial, positions, a.B, a.T, C, dtype_);
  tp().reduce_scatter_sum(a.tp_sum, a.x[0]);
}

template <class Config, class Acts>
void DecoderModel<Config, Acts>::vocab_parallel_embed_backward(Acts& a, const Batch& batch,
                                                               size_t embed, float* d_positions) {
  const VocabSlice v = vocab();
  embedding_backward_slice(g(embed), v.first, v.cols, d_positions, whole_residual_grad(a),
                           batch.inputs.data<int32_t>(), a.B, a.T, config_.n_embd);
}

template <class Config, class Acts>
double DecoderModel<Config, Acts>::vocab_parallel_head_forward(Acts& a, const Batch& batch,
                                                               const void* normed, size_t head) {
  const int64_t M = a.B * a.T, C = config_.n_embd;
  const VocabSlice v = vocab();
  gemm(1, MatView::row_major(normed, dtype_, M, C),
       MatView::row_major(w(head), dtype_, v.cols, C).t(),
       MatView::row_major(a.logits.raw(), DType::f32, M, v.cols));
  return vocab_parallel_cross_entropy_forward(a.losses, a.row_shift,
                                              a.logits.template data<float>(),
                                              batch.targets.data<int32_t>(), M, v, tp());
}

template <class Config, class Acts>
const float* DecoderModel<Config, Acts>::vocab_parallel_head_backward(Acts& a, const Batch& batch,
                                                                      float grad_scale,
                                                                      const void* normed,
                                                                      size_t head,
                                                                      void* cast_scratch) {
  const int64_t M = a.B * a.T, C = config_.n_embd;
  const VocabSlice v = vocab();
  // The padded columns get a zero gradient: their rows never change.
  void* grad = dtype_ == DType::f32 ? a.logits.raw() : cast_scratch;
  cross_entropy_backward_slice(grad, dtype_, a.logits.template data<float>(),
                               batch.targets.data<int32_t>(), grad_scale, M, v.first, v.real(),
                               v.cols, a.row_shift.template data<float>());
  const LinearPart part[] = {{w(head), g(head), v.cols}};
  fused_linear_backward_from(a.d_small.template data<float>(), grad, normed, part, M, C, dtype_);
  return sum_input_grad(a, a.d_small);
}

template <class Config, class Acts>
void DecoderModel<Config, Acts>::add_tp_work(ModelWork& w, int64_t B, int64_t T) const {
  if (!tensor_parallel()) return;
  const double ranks = tp_slice_.ranks;
  for (SegmentWork* s : {&w.root_forward_pre, &w.root_forward_post, &w.root_backward_pre,
                         &w.root_backward_post, &w.block_forward, &w.block_backward}) {
    s->flops /= ranks;
    s->bytes /= ranks;
  }
  const double f32 = sizeof(float), rows = double(B) * double(T);
  const double stream = rows * double(config_.n_embd) * f32;  // [B·T, C] FP32
  const double normed = stream / f32 * double(dtype_size(dtype_));
  const TpCollective reduce{TpOp::all_reduce, stream};
  using enum ActivationCheckpointing;
  const ActivationCheckpointing mode = activation_checkpointing();
  // The loss: the rows' maxima, then their sums of exponentials with their targets' logits.
  w.root_forward_post.tp = {{TpOp::all_reduce, rows * f32}, {TpOp::all_reduce, 2 * rows * f32}};
  auto& fb = w.block_forward.tp;
  auto& bb = w.block_backward.tp;
  if (!sequence_parallel()) {
    w.root_forward_pre.tp = {reduce};        // the embedding's partial rows
    fb = {reduce, reduce};                   // each row-parallel output
    w.root_backward_pre.tp = {reduce};       // the head's input gradient
    if (mode == full) bb.push_back(reduce);  // the attention's output, recomputed
    bb.push_back(reduce);                    // the MLP's input gradient
    bb.push_back(reduce);                    // the attention's input gradient
    return;
  }
  const TpCollective gather_normed{TpOp::all_gather, normed}, gather_grad{TpOp::all_gather, stream},
      scatter{TpOp::reduce_scatter, stream};
  w.root_forward_pre.tp = {scatter};
  fb = {gather_normed, scatter, gather_normed, scatter};
  w.root_forward_post.tp.insert(w.root_forward_post.tp.begin(), gather_normed);  // the final norm
  w.root_backward_pre.tp = {scatter};
  if (mode == selective) bb = {gather_normed, gather_normed};
  if (mode == full) bb = {gather_normed, scatter, gather_normed};
  bb.insert(bb.end(), {gather_grad, scatter, gather_grad, scatter});
  w.root_backward_post.tp = {gather_grad};  // the embedding's gradient reads every row's
}

template <class Config, class Acts>
DecoderModel<Config, Acts>::~DecoderModel() = default;

template <class Config, class Acts>
std::unique_ptr<Acts> DecoderModel<Config, Acts>::make_activations(int64_t B, int64_t T,
                                                                   const StageBlocks& blocks) {
  // TP's collectives read peers' operands in place from the group's shared memory.
  ActivationArena::SharedAllocator shared;
  if (tensor_parallel())
    shared = [this](std::string name, int64_t bytes) {
      return tp().shared_buffer(std::move(name), bytes);
    };
  return std::make_unique<Acts>(config_, dtype_, B, T, activation_checkpointing(), tp_slice_,
                                blocks, Device::cpu, shared);
}

template <class Config, class Acts>
Acts& DecoderModel<Config, Acts>::activations_for(int64_t B, int64_t T) {
  if (!whole_ || whole_->B != B || whole_->T != T || whole_->mode != activation_checkpointing()) {
    whole_.reset();  // free the old set before allocating the new one
    whole_ = make_activations(B, T, whole_model());
  }
  acts_ = whole_.get();
  return *acts_;
}

template <class Config, class Acts>
int64_t DecoderModel<Config, Acts>::activation_bytes_for(int64_t B, int64_t T,
                                                         ActivationCheckpointing mode) const {
  return Acts(config_, dtype_, B, T, mode, tp_slice_, whole_model(), Device::meta).arena.bytes();
}

template <class Config, class Acts>
int64_t DecoderModel<Config, Acts>::stage_activation_bytes(int64_t B, int64_t T,
                                                           const StageBlocks& blocks) const {
  return Acts(config_, dtype_, B, T, activation_checkpointing(), tp_slice_, blocks, Device::meta)
      .arena.bytes();
}

template <class Config, class Acts>
LogitsView DecoderModel<Config, Acts>::last_logits() const {
  if (!whole_) fail("{}::last_logits called before any forward", name_);
  if (tensor_parallel()) fail("{}: each tensor-parallel rank holds a slice of the logits", name_);
  return {whole_->logits.template data<float>(), config_.padded_vocab(), config_.vocab_size};
}

template <class Config, class Acts>
int64_t DecoderModel<Config, Acts>::stage_boundary_numel(int64_t B, int64_t T) const {
  return (sequence_parallel() ? B * T / tp_slice_.ranks : B * T) * config_.n_embd;
}

template <class Config, class Acts>
Acts& DecoderModel<Config, Acts>::stage_activations(int stage, int micro, const StageBlocks& blocks,
                                                    int64_t B, int64_t T) {
  std::unique_ptr<Acts>& slot = in_flight_[{stage, micro}];
  if (slot) fail("{}: stage {} ran micro-batch {}'s forward twice", name_, stage, micro);
  auto fits = [&](const std::unique_ptr<Acts>& a) {
    return a->B == B && a->T == T && a->mode == activation_checkpointing() && a->blocks == blocks;
  };
  const auto spare = std::find_if(spare_.begin(), spare_.end(), fits);
  if (spare != spare_.end()) {
    slot = std::move(*spare);
    spare_.erase(spare);
  } else {
    // A new shape (an evaluation's, a last partial batch): sets of other shapes go first.
    std::erase_if(spare_, [&](const std::unique_ptr<Acts>& a) {
      return a->B != B || a->T != T || a->mode != activation_checkpointing();
    });
    slot = make_activations(B, T, blocks);
  }
  acts_ = slot.get();
  return *slot;
}

template <class Config, class Acts>
Acts& DecoderModel<Config, Acts>::in_flight(int stage, int micro) {
  const auto it = in_flight_.find({stage, micro});
  if (it == in_flight_.end())
    fail("{}: stage {} ran micro-batch {}'s backward before its forward", name_, stage, micro);
  acts_ = it->second.get();
  return *acts_;
}

template <class Config, class Acts>
void DecoderModel<Config, Acts>::retire(int stage, int micro) {
  const auto it = in_flight_.find({stage, micro});
  if (it == in_flight_.end()) return;
  spare_.push_back(std::move(it->second));
  in_flight_.erase(it);
  acts_ = nullptr;
}

template <class Config, class Acts>
double DecoderModel<Config, Acts>::stage_forward(int stage, const StageBlocks& blocks, int micro,
                                                 const Batch& batch, const Tensor& input,
                                                 const Tensor& output) {
  check_batch(batch);
  Acts& a = stage_activations(stage, micro, blocks, batch.B(), batch.T());
  const size_t n = size_t(a.rows * config_.n_embd);
  if (blocks.first_stage)
    embed_forward(a, batch);
  else
    cast(input.raw(), input.dtype(), a.x[size_t(blocks.first)].raw(), DType::f32, n);
  UnitHooks none;  // the stage's parameters are bound for the whole step
  forward_blocks(none, blocks.first, blocks.end);
  if (blocks.last_stage) return head_forward(a, batch);
  cast(a.x[size_t(blocks.end)].raw(), DType::f32, output.raw(), output.dtype(), n);
  return 0;
}

template <class Config, class Acts>
void DecoderModel<Config, Acts>::stage_backward(int stage, const StageBlocks& blocks, int micro,
                                                const Batch& batch, float grad_scale,
                                                const Tensor& d_output, const Tensor& d_input) {
  Acts& a = in_flight(stage, micro);
  const size_t n = size_t(a.rows * config_.n_embd);
  if (blocks.last_stage)
    head_backward(a, batch, grad_scale);
  else
    cast(d_output.raw(), d_output.dtype(), a.dx.raw(), DType::f32, n);
  UnitHooks none;
  backward_blocks(none, blocks.first, blocks.end);
  if (blocks.first_stage)
    embed_backward(a, batch);
  else
    cast(a.dx.raw(), DType::f32, d_input.raw(), d_input.dtype(), n);
  retire(stage, micro);
}

template <class Config, class Acts>
void DecoderModel<Config, Acts>::stage_discard(int stage, int micro) {
  in_flight_.erase({stage, micro});  // evaluation's shapes are not training's: not kept
  acts_ = nullptr;
}

template <class Config, class Acts>
LmHeadShape DecoderModel<Config, Acts>::head_shape(const Acts& a) const {
  return {a.B * a.T, config_.n_embd, config_.vocab_size, config_.padded_vocab()};
}

template <class Config, class Acts>
void DecoderModel<Config, Acts>::check_batch(const Batch& batch) const {
  check_token_batch(batch, config_.block_size, name_);
  if (sequence_parallel() && batch.T() % tp_slice_.ranks != 0)
    fail_input(
        "{}: sequence parallelism splits each sequence over {} tensor-parallel ranks, but the "
        "batch's sequences are {} tokens long (not divisible by {})",
        name_, tp_slice_.ranks, batch.T(), tp_slice_.ranks);
}

template <class Config, class Acts>
double DecoderModel<Config, Acts>::forward_loss(const Batch& batch, UnitHooks& hooks) {
  check_batch(batch);
  Acts& a = activations_for(batch.B(), batch.T());
  hooks.before_forward(0);
  embed_forward(a, batch);
  forward_blocks(hooks);
  const double loss = head_forward(a, batch);
  hooks.after_forward(0);
  return loss;
}

template <class Config, class Acts>
double DecoderModel<Config, Acts>::forward_backward(const Batch& batch, float grad_scale,
                                                    UnitHooks& hooks) {
  const double loss = forward_loss(batch, hooks);
  Acts& a = *whole_;
  acts_ = whole_.get();
  hooks.before_backward(0);
  head_backward(a, batch, grad_scale);
  backward_blocks(hooks);
  embed_backward(a, batch);
  hooks.after_backward(0);
  return loss;
}

}  // namespace st
