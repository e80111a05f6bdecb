#pragma once
// GPT-2's architecture with explicit forward/backward pairs per block (llm.c style).
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "core/model/param_spec.hpp"
#include "core/ops/attention.hpp"

namespace st {

struct GPTConfig {
  int64_t n_layer = 4;
  int64_t n_embd = 256;
  int64_t n_head = 4;
  int64_t block_size = 256;
  int64_t vocab_size = 256;
};

class GPT final : public Model {
 public:
  GPT(const GPTConfig& config, DType compute_dtype);
  ~GPT() override;

  const GPTConfig& config() const { return config_; }
  const std::vector<ParamSpec>& param_specs() const override { return specs_; }
  int num_units() const override { return int(config_.n_layer) + 1; }
  DType compute_dtype() const override { return dtype_; }

  double forward_backward(const Batch& batch, float grad_scale, UnitHooks& hooks) override;
  double forward_loss(const Batch& batch, UnitHooks& hooks) override;
  double flops_per_token() const override;

  // Bytes of activations and scratch one micro-batch of [B, T] keeps (counted on meta).
  int64_t activation_bytes(int64_t B, int64_t T) const;

  // The logits [B*T, V] (FP32) of the last forward.
  const float* last_logits() const;

 private:
  struct Activations;
  Activations& activations_for(int64_t B, int64_t T);

  // Indices into specs_ of the twelve parameters of block l (in declaration order).
  size_t block_param(int64_t layer, int which) const { return 2 + size_t(layer) * 12 + which; }
  size_t ln_f_weight() const { return 2 + size_t(config_.n_layer) * 12; }

  void check_batch(const Batch& batch) const;
  void embed_forward(Activations& a, const Batch& batch);
  void block_forward(Activations& a, int64_t layer);
  // Logits and per-token losses; returns their sum.
  double head_forward(Activations& a, const Batch& batch);
  // Gradient of the loss through the logits and ln_f into a.dx.
  void head_backward(Activations& a, const Batch& batch, float grad_scale);
  void block_backward(Activations& a, int64_t layer);
  void embed_backward(Activations& a, const Batch& batch);

  GPTConfig config_;
  DType dtype_;
  std::vector<ParamSpec> specs_;
  std::unique_ptr<Activations> acts_;
};

}  // namespace st
