#include "tests/support/mlp.hpp"

#include <cstring>

#include "core/ops/cross_entropy.hpp"
#include "core/ops/elementwise.hpp"
#include "core/ops/gelu.hpp"
#include "core/ops/linear.hpp"

namespace st {

MLP::MLP(const MLPConfig& c, DType compute_dtype) : config_(c), dtype_(compute_dtype) {
  specs_ = {
      {"embed.weight", {c.vocab_size, c.n_embd}, InitKind::normal, 0.5f, false, 0},
      {"fc1.weight", {c.n_embd, c.hidden}, InitKind::normal, 0.3f, true, 1},
      {"fc1.bias", {c.hidden}, InitKind::zeros, 0.f, false, 1},
      {"fc2.weight", {c.hidden, c.vocab_size}, InitKind::normal, 0.3f, true, 2},
      {"fc2.bias", {c.vocab_size}, InitKind::zeros, 0.f, false, 2},
  };
}

double MLP::flops_per_token() const {
  return 6.0 * double(config_.n_embd * config_.hidden + config_.hidden * config_.vocab_size);
}

int64_t MLP::activation_bytes(int64_t B, int64_t T) const {
  const int64_t M = B * T, D = config_.n_embd, H = config_.hidden, V = config_.vocab_size;
  const int64_t s = int64_t(dtype_size(dtype_));
  // emb, h, gelu, logits (dtype and FP32), losses, then backward's d_gelu, scratch and d_emb.
  return s * (M * D + 2 * M * H + M * V) + 4 * (M * V + M + M * H + M * D) + s * M * std::max(H, V);
}

std::string MLP::describe() const {
  return fmt::format("MLP V={} D={} H={}", config_.vocab_size, config_.n_embd, config_.hidden);
}

std::vector<std::pair<std::string, int64_t>> MLP::hyperparameters() const {
  return {
      {"vocab_size", config_.vocab_size}, {"n_embd", config_.n_embd}, {"hidden", config_.hidden}};
}

double MLP::forward_loss(const Batch& batch, UnitHooks& hooks) {
  return run(batch, 0.f, false, hooks);
}

double MLP::forward_backward(const Batch& batch, float grad_scale, UnitHooks& hooks) {
  return run(batch, grad_scale, true, hooks);
}

double MLP::run(const Batch& batch, float grad_scale, bool backward, UnitHooks& hooks) {
  const int64_t M = batch.B() * batch.T(), D = config_.n_embd, H = config_.hidden,
                V = config_.vocab_size;
  const int32_t* tokens = batch.inputs.data<int32_t>();
  Tensor emb = Tensor::empty("mlp.emb", {M, D}, dtype_);
  Tensor h = Tensor::empty("mlp.h", {M, H}, dtype_);
  Tensor g = Tensor::empty("mlp.gelu", {M, H}, dtype_);
  Tensor logits_act = Tensor::empty("mlp.logits_act", {M, V}, dtype_);
  Tensor logits = Tensor::empty("mlp.logits", {M, V}, DType::f32);
  Tensor losses = Tensor::empty("mlp.losses", {M}, DType::f32);

  hooks.before_forward(0);
  const size_t row_bytes = size_t(D) * dtype_size(dtype_);
  for (int64_t i = 0; i < M; ++i) {
    if (tokens[i] < 0 || tokens[i] >= V) fail("MLP: token {} outside [0, {})", tokens[i], V);
    std::memcpy(static_cast<char*>(emb.raw()) + size_t(i) * row_bytes,
                static_cast<const char*>(param(0).value.raw()) + size_t(tokens[i]) * row_bytes,
                row_bytes);
  }
  hooks.before_forward(1);
  linear_forward(h.raw(), emb.raw(), param(1).value.raw(), param(2).value.raw(), M, D, H, dtype_);
  gelu_forward(g.raw(), h.raw(), size_t(M * H), dtype_);
  hooks.after_forward(1);
  hooks.before_forward(2);
  linear_forward(logits_act.raw(), g.raw(), param(3).value.raw(), param(4).value.raw(), M, H, V,
                 dtype_);
  cast(logits_act.raw(), dtype_, logits.raw(), DType::f32, size_t(M * V));
  cross_entropy_forward(losses.data<float>(), logits.data<float>(), batch.targets.data<int32_t>(),
                        M, V, V);
  hooks.after_forward(2);
  hooks.after_forward(0);
  double sum = 0;
  for (int64_t i = 0; i < M; ++i) sum += losses.data<float>()[i];
  if (!backward) return sum;

  hooks.before_backward(0);
  float* d_logits = logits.data<float>();
  cross_entropy_backward(d_logits, d_logits, batch.targets.data<int32_t>(), grad_scale, M, V, V);
  hooks.before_backward(2);
  Tensor d_g = Tensor::empty("mlp.d_gelu", {M, H}, DType::f32);
  Tensor scratch = Tensor::empty("mlp.grad_cast", {M, std::max(H, V)}, dtype_);
  linear_backward(d_g.data<float>(), param(3).grad.data<float>(), param(4).grad.data<float>(),
                  d_logits, scratch.raw(), g.raw(), param(3).value.raw(), M, H, V, dtype_);
  hooks.after_backward(2);
  hooks.before_backward(1);
  gelu_backward(d_g.data<float>(), d_g.data<float>(), h.raw(), size_t(M * H), dtype_);
  Tensor d_emb = Tensor::empty("mlp.d_emb", {M, D}, DType::f32);
  linear_backward(d_emb.data<float>(), param(1).grad.data<float>(), param(2).grad.data<float>(),
                  d_g.data<float>(), scratch.raw(), emb.raw(), param(1).value.raw(), M, D, H,
                  dtype_);
  hooks.after_backward(1);
  float* d_table = param(0).grad.data<float>();
  for (int64_t i = 0; i < M; ++i)
    for (int64_t c = 0; c < D; ++c) d_table[tokens[i] * D + c] += d_emb.data<float>()[i * D + c];
  hooks.after_backward(0);
  return sum;
}

}  // namespace st
