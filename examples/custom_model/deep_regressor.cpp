#include "deep_regressor.hpp"

#include <fmt/format.h>

#include <cmath>

#include "core/error.hpp"
#include "core/ops/elementwise.hpp"
#include "core/ops/gelu.hpp"
#include "core/ops/linear.hpp"

using namespace st;

// Parameters: 0 in.weight [D, H], 1 in.bias, 2 out.weight [H, 1], 3 out.bias (unit 0), then
// layers.l.weight [H, H] and .bias (unit l + 1). Weights are [in, out].
DeepRegressor::DeepRegressor(RegressorShape s, DType compute_dtype)
    : shape_(s), dtype_(compute_dtype) {
  const float in_std = 1.0f / std::sqrt(float(s.inputs)), std = 1.0f / std::sqrt(float(s.hidden));
  specs_ = {{"in.weight", {s.inputs, s.hidden}, InitKind::normal, in_std, true, 0},
            {"in.bias", {s.hidden}, InitKind::zeros, 0, false, 0},
            {"out.weight", {s.hidden, 1}, InitKind::normal, std, true, 0},
            {"out.bias", {1}, InitKind::zeros, 0, false, 0}};
  for (int64_t l = 0; l < s.layers; ++l) {
    const int unit = int(l) + 1;
    specs_.push_back({fmt::format("layers.{}.weight", l),
                      {s.hidden, s.hidden},
                      InitKind::normal,
                      std,
                      true,
                      unit});
    specs_.push_back(
        {fmt::format("layers.{}.bias", l), {s.hidden}, InitKind::zeros, 0, false, unit});
  }
}

double DeepRegressor::forward_backward(const Batch& batch, float grad_scale, UnitHooks& hooks) {
  return run(batch, grad_scale, true, hooks);
}

double DeepRegressor::forward_loss(const Batch& batch, UnitHooks& hooks) {
  return run(batch, 0, false, hooks);
}

double DeepRegressor::run(const Batch& batch, float grad_scale, bool backward, UnitHooks& hooks) {
  const int64_t M = batch.inputs.dim(0), D = shape_.inputs, H = shape_.hidden, L = shape_.layers;
  if (batch.inputs.shape() != Shape{M, D} || batch.targets.shape() != Shape{M, 1})
    fail_input("DeepRegressor: inputs {} and targets {} must be [B, {}] and [B, 1]",
               shape_string(batch.inputs.shape()), shape_string(batch.targets.shape()), D);
  auto w = [&](size_t i) { return param(i).value.raw(); };
  auto g = [&](size_t i) { return param(i).grad.data<float>(); };
  Tensor x = Tensor::empty("x", {M, D}, dtype_);
  cast(batch.inputs.raw(), DType::f32, x.raw(), dtype_, size_t(M * D));
  std::vector<Tensor> pre, act;  // per layer 0..L: before and after GELU, dtype [M, H]
  for (int64_t l = 0; l <= L; ++l) {
    pre.push_back(Tensor::empty("pre", {M, H}, dtype_));
    act.push_back(Tensor::empty("act", {M, H}, dtype_));
  }
  Tensor y = Tensor::empty("y", {M, 1}, dtype_), y32 = Tensor::empty("y32", {M, 1}, DType::f32);

  hooks.before_forward(0);
  linear_forward(pre[0].raw(), x.raw(), w(0), w(1), M, D, H, dtype_);
  gelu_forward(act[0].raw(), pre[0].raw(), size_t(M * H), dtype_);
  for (int64_t l = 0; l < L; ++l) {
    hooks.before_forward(int(l) + 1);
    linear_forward(pre[l + 1].raw(), act[l].raw(), w(4 + 2 * l), w(5 + 2 * l), M, H, H, dtype_);
    gelu_forward(act[l + 1].raw(), pre[l + 1].raw(), size_t(M * H), dtype_);
    hooks.after_forward(int(l) + 1);
  }
  linear_forward(y.raw(), act[L].raw(), w(2), w(3), M, H, 1, dtype_);
  hooks.after_forward(0);
  cast(y.raw(), dtype_, y32.raw(), DType::f32, size_t(M));
  const float* t = batch.targets.data<float>();
  Tensor d_y = Tensor::empty("d_y", {M, 1}, DType::f32);
  double loss = 0;
  for (int64_t i = 0; i < M; ++i) {
    const float e = y32.data<float>()[i] - t[i];
    loss += 0.5 * double(e) * e;
    d_y.data<float>()[i] = e * grad_scale;
  }
  if (!backward) return loss;

  Tensor d_act = Tensor::empty("d_act", {M, H}, DType::f32);  // gradient after GELU
  Tensor d_next = Tensor::empty("d_next", {M, H}, DType::f32);
  Tensor scratch = Tensor::empty("grad_cast", {M, H}, dtype_);
  hooks.before_backward(0);
  linear_backward(d_act.data<float>(), g(2), g(3), d_y.data<float>(), scratch.raw(), act[L].raw(),
                  w(2), M, H, 1, dtype_);
  for (int64_t l = L - 1; l >= 0; --l) {
    hooks.before_backward(int(l) + 1);
    linear_backward(d_next.data<float>(), g(4 + 2 * l), g(5 + 2 * l), d_act.data<float>(),
                    scratch.raw(), act[l].raw(), w(4 + 2 * l), M, H, H, dtype_, pre[l + 1].raw());
    std::swap(d_act, d_next);
    hooks.after_backward(int(l) + 1);
  }
  linear_backward(nullptr, g(0), g(1), d_act.data<float>(), scratch.raw(), x.raw(), w(0), M, D, H,
                  dtype_, pre[0].raw());
  hooks.after_backward(0);
  return loss;
}

double DeepRegressor::flops_per_token() const {
  const double D = double(shape_.inputs), H = double(shape_.hidden);
  return 6.0 * (D * H + double(shape_.layers) * H * H + H);
}

int64_t DeepRegressor::activation_bytes(int64_t B, int64_t /*T*/) const {
  return B * shape_.hidden * (2 * (shape_.layers + 1) + 3) * 4;
}

std::string DeepRegressor::describe() const {
  return fmt::format("DeepRegressor D={} H={} L={}", shape_.inputs, shape_.hidden, shape_.layers);
}

std::vector<std::pair<std::string, int64_t>> DeepRegressor::hyperparameters() const {
  return {{"inputs", shape_.inputs}, {"hidden", shape_.hidden}, {"layers", shape_.layers}};
}
