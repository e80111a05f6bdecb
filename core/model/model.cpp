#include "core/model/model.hpp"

#include "core/model/tensor_parallel.hpp"

namespace st {

const char* activation_checkpointing_name(ActivationCheckpointing mode) {
  switch (mode) {
    case ActivationCheckpointing::none:
      return "none";
    case ActivationCheckpointing::selective:
      return "selective";
    case ActivationCheckpointing::full:
      return "full";
  }
  return "?";
}

void Model::set_activation_checkpointing(ActivationCheckpointing mode) {
  if (mode != ActivationCheckpointing::none)
    fail_input("activation checkpointing '{}': {} declares no blocks to recompute (only 'none')",
               activation_checkpointing_name(mode), describe());
}

void check_token_batch(const Batch& batch, int64_t block_size, const char* model) {
  if (batch.inputs.ndim() != 2 || batch.targets.shape() != batch.inputs.shape())
    fail("{} batch: inputs {} and targets {} must both be [B, T]", model,
         shape_string(batch.inputs.shape()), shape_string(batch.targets.shape()));
  if (batch.T() > block_size)
    fail_input("{} batch: sequence length {} exceeds the context length block_size {}", model,
               batch.T(), block_size);
}

double ModelWork::total_flops(int64_t blocks) const {
  return root_forward_pre.flops + root_forward_post.flops + root_backward_pre.flops +
         root_backward_post.flops + double(blocks) * (block_forward.flops + block_backward.flops);
}

double ModelWork::total_bytes(int64_t blocks) const {
  return root_forward_pre.bytes + root_forward_post.bytes + root_backward_pre.bytes +
         root_backward_post.bytes + double(blocks) * (block_forward.bytes + block_backward.bytes);
}

ModelWork Model::work(int64_t, int64_t) const {
  fail_input("{} does not describe its work per segment, so it cannot be simulated", describe());
}

void Model::set_tensor_parallel(TensorParallel* tp) {
  if (tp && tp->size() > 1)
    fail_input("{} has no tensor-parallel plan: it cannot run over {} tensor-parallel ranks",
               describe(), tp->size());
}

LogitsView Model::last_logits() const {
  fail("{} keeps no logits to sample from", describe());
}

int64_t Model::stage_boundary_numel(int64_t, int64_t) const {
  fail_input("{} is not made of blocks: it cannot be split into pipeline stages (parallel.pp)",
             describe());
}

double Model::stage_forward(int, const StageBlocks&, int, const Batch&, const Tensor&,
                            const Tensor&) {
  stage_boundary_numel(0, 0);
  return 0;
}

void Model::stage_backward(int, const StageBlocks&, int, const Batch&, float, const Tensor&,
                           const Tensor&) {
  stage_boundary_numel(0, 0);
}

void Model::stage_discard(int, int) {
  stage_boundary_numel(0, 0);
}

void Model::bind(size_t index, Tensor value, Tensor grad) {
  const auto& specs = param_specs();
  ST_CHECK(index < specs.size(), "parameter index {} out of range", index);
  const ParamSpec& spec = specs[index];
  if (value.shape() != spec.shape || value.dtype() != compute_dtype())
    fail("binding parameter '{}': expected {} {} but got {} {}", spec.name,
         dtype_name(compute_dtype()), shape_string(spec.shape), dtype_name(value.dtype()),
         shape_string(value.shape()));
  if (grad.defined() && (grad.shape() != spec.shape || grad.dtype() != DType::f32))
    fail("binding gradient of '{}': expected fp32 {} but got {} {}", spec.name,
         shape_string(spec.shape), dtype_name(grad.dtype()), shape_string(grad.shape()));
  if (bound_.size() < specs.size()) bound_.resize(specs.size());
  bound_[index] = {std::move(value), std::move(grad)};
}

void Model::unbind(size_t index) {
  if (index < bound_.size()) bound_[index] = {};
}

const BoundParam& Model::param(size_t index) const {
  if (index >= bound_.size() || !bound_[index].value.defined())
    fail("parameter '{}' is used before it was bound to memory",
         index < param_specs().size() ? param_specs()[index].name : std::to_string(index));
  return bound_[index];
}

}  // namespace st
