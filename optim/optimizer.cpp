#include "optim/optimizer.hpp"

#include <cmath>

#include "core/op_profile.hpp"

namespace st {
namespace {
// Spans shorter than this are updated by the calling thread alone.
constexpr int64_t kParallelThreshold = 1 << 15;
}  // namespace

AdamW::AdamW(std::vector<OptimParam> params, const OptimizerConfig& config)
    : Optimizer(std::move(params)), config_(config) {
  for (const auto& p : params_) {
    m_.push_back(Tensor::zeros(p.name + ".exp_avg", {p.master.numel()}, DType::f32));
    v_.push_back(Tensor::zeros(p.name + ".exp_avg_sq", {p.master.numel()}, DType::f32));
  }
}

void AdamW::step(float lr, float grad_scale) {
  OpScope scope(OpKind::optimizer);
  ++steps_;
  const float b1 = config_.beta1, b2 = config_.beta2, eps = config_.eps;
  const float bias1 = 1.0f - std::pow(b1, float(steps_));
  const float bias2_sqrt = std::sqrt(1.0f - std::pow(b2, float(steps_)));
  const float step_size = lr / bias1;
  for (size_t k = 0; k < params_.size(); ++k) {
    const OptimParam& p = params_[k];
    float* w = p.master.data<float>();
    const float* g = p.grad.data<float>();
    float* m = m_[k].data<float>();
    float* v = v_[k].data<float>();
    const float decay = p.weight_decay ? 1.0f - lr * config_.weight_decay : 1.0f;
    const int64_t n = p.master.numel();
#pragma omp parallel for simd schedule(static) if (n > kParallelThreshold)
    for (int64_t i = 0; i < n; ++i) {
      const float gi = g[i] * grad_scale;
      const float mi = b1 * m[i] + (1.0f - b1) * gi;
      const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
      m[i] = mi;
      v[i] = vi;
      w[i] = w[i] * decay - step_size * mi / (std::sqrt(vi) / bias2_sqrt + eps);
    }
  }
}

std::vector<std::pair<std::string, Tensor>> AdamW::state() {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t k = 0; k < params_.size(); ++k) {
    out.emplace_back(params_[k].name + ".exp_avg", m_[k]);
    out.emplace_back(params_[k].name + ".exp_avg_sq", v_[k]);
  }
  return out;
}

SGD::SGD(std::vector<OptimParam> params, const OptimizerConfig& config)
    : Optimizer(std::move(params)), config_(config) {
  for (const auto& p : params_)
    momentum_.push_back(Tensor::zeros(p.name + ".momentum", {p.master.numel()}, DType::f32));
}

void SGD::step(float lr, float grad_scale) {
  OpScope scope(OpKind::optimizer);
  ++steps_;
  const float mu = config_.beta1;
  for (size_t k = 0; k < params_.size(); ++k) {
    const OptimParam& p = params_[k];
    float* w = p.master.data<float>();
    const float* g = p.grad.data<float>();
    float* buf = momentum_[k].data<float>();
    const float decay = p.weight_decay ? 1.0f - lr * config_.weight_decay : 1.0f;
    const int64_t n = p.master.numel();
#pragma omp parallel for simd schedule(static) if (n > kParallelThreshold)
    for (int64_t i = 0; i < n; ++i) {
      buf[i] = mu * buf[i] + g[i] * grad_scale;
      w[i] = w[i] * decay - lr * buf[i];
    }
  }
}

std::vector<std::pair<std::string, Tensor>> SGD::state() {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t k = 0; k < params_.size(); ++k)
    out.emplace_back(params_[k].name + ".momentum", momentum_[k]);
  return out;
}

std::unique_ptr<Optimizer> make_optimizer(std::vector<OptimParam> params,
                                          const OptimizerConfig& config) {
  switch (config.kind) {
    case OptimizerKind::adamw:
      return std::make_unique<AdamW>(std::move(params), config);
    case OptimizerKind::sgd:
      return std::make_unique<SGD>(std::move(params), config);
  }
  fail("unknown optimizer kind {}", int(config.kind));
}

int states_per_element(OptimizerKind kind) {
  return kind == OptimizerKind::adamw ? 2 : 1;
}

const char* optimizer_name(OptimizerKind kind) {
  return kind == OptimizerKind::adamw ? "adamw" : "sgd";
}

}  // namespace st
