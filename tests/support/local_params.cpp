#include "tests/support/local_params.hpp"

#include "core/ops/elementwise.hpp"

namespace st {

LocalParams::LocalParams(Model& model, uint64_t seed) : model_(model) {
  const auto& specs = model.param_specs();
  int64_t total = 0;
  for (const auto& s : specs) total += s.numel();
  const DType dtype = model.compute_dtype();
  master_flat_ = Tensor::empty("params.master", {total}, DType::f32);
  grad_flat_ = Tensor::zeros("params.grad", {total}, DType::f32);
  compute_flat_ =
      dtype == DType::f32 ? master_flat_ : Tensor::empty("params.compute", {total}, dtype);
  int64_t offset = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const int64_t n = specs[i].numel();
    Tensor master =
        master_flat_.slice(offset, offset + n).view(specs[i].shape).renamed(specs[i].name);
    init_param_elements(specs[i], seed, i, 0, size_t(n), master.data<float>());
    Tensor grad =
        grad_flat_.slice(offset, offset + n).view(specs[i].shape).renamed(specs[i].name + ".grad");
    Tensor value =
        compute_flat_.slice(offset, offset + n).view(specs[i].shape).renamed(specs[i].name);
    model.bind(i, value, grad);
    masters_.push_back(master);
    grads_.push_back(grad);
    offset += n;
  }
  cast_for_compute();
}

void LocalParams::cast_for_compute() {
  cast(master_flat_.raw(), DType::f32, compute_flat_.raw(), compute_flat_.dtype(),
       size_t(master_flat_.numel()));
}

void LocalParams::zero_grads() {
  grad_flat_.zero_();
}

std::vector<OptimParam> LocalParams::optim_params() const {
  std::vector<OptimParam> out;
  const auto& specs = model_.param_specs();
  for (size_t i = 0; i < specs.size(); ++i)
    out.push_back(make_optim_param(specs[i].name, masters_[i], grads_[i], specs[i].weight_decay));
  return out;
}

}  // namespace st
