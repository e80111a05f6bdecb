#pragma once
// DecoderModel's member definitions (see decoder_model.hpp): included by a family's .cpp once
// its activations type is complete, then instantiated there.
#include <fmt/format.h>

#include "core/error.hpp"
#include "core/model/decoder_model.hpp"
#include "core/model/tensor_parallel.hpp"

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
DecoderModel<Config, Acts>::~DecoderModel() = default;

template <class Config, class Acts>
Acts& DecoderModel<Config, Acts>::activations_for(int64_t B, int64_t T) {
  if (!acts_ || acts_->B != B || acts_->T != T || acts_->mode != activation_checkpointing()) {
    acts_.reset();  // free the old set before allocating the new one
    acts_ = std::make_unique<Acts>(config_, dtype_, B, T, activation_checkpointing(),
                                   tp_slice_.ranks, Device::cpu);
  }
  return *acts_;
}

template <class Config, class Acts>
int64_t DecoderModel<Config, Acts>::activation_bytes_for(int64_t B, int64_t T,
                                                         ActivationCheckpointing mode) const {
  return Acts(config_, dtype_, B, T, mode, tp_slice_.ranks, Device::meta).arena.bytes();
}

template <class Config, class Acts>
LogitsView DecoderModel<Config, Acts>::last_logits() const {
  if (!acts_) fail("{}::last_logits called before any forward", name_);
  if (tensor_parallel()) fail("{}: each tensor-parallel rank holds a slice of the logits", name_);
  return {acts_->logits.template data<float>(), config_.padded_vocab(), config_.vocab_size};
}

template <class Config, class Acts>
LmHeadShape DecoderModel<Config, Acts>::head_shape(const Acts& a) const {
  return {a.B * a.T, config_.n_embd, config_.vocab_size, config_.padded_vocab()};
}

template <class Config, class Acts>
double DecoderModel<Config, Acts>::forward_loss(const Batch& batch, UnitHooks& hooks) {
  check_token_batch(batch, config_.block_size, name_);
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
  Acts& a = *acts_;
  hooks.before_backward(0);
  head_backward(a, batch, grad_scale);
  backward_blocks(hooks);
  embed_backward(a, batch);
  hooks.after_backward(0);
  return loss;
}

}  // namespace st
