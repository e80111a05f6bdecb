#pragma once
// GPT-2's architecture with explicit forward/backward pairs per block (llm.c style).
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/data/tokenizer.hpp"
#include "core/model/block_model.hpp"
#include "core/ops/attention.hpp"
#include "core/ops/lm_head.hpp"

namespace st {

struct GPTConfig {
  int64_t n_layer = 4;
  int64_t n_embd = 256;
  int64_t n_head = 4;
  int64_t block_size = 256;
  int64_t vocab_size = kByteVocabSize;
  int64_t padded_vocab_size = 0;  // 0: vocab_size rounded up (st::padded_vocab)
  int64_t padded_vocab() const { return st::padded_vocab(vocab_size, padded_vocab_size); }
};

class GPT final : public BlockModel {
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
  std::array<int64_t, 3> largest_matmul(int64_t tokens) const override;
  ModelWork work(int64_t B, int64_t T) const override;
  // Counted on the meta device: the same layout, no memory.
  int64_t activation_bytes_for(int64_t B, int64_t T, ActivationCheckpointing mode) const override;
  std::string describe() const override;
  std::vector<std::pair<std::string, int64_t>> hyperparameters() const override;

  // [B*T, padded V] (FP32): row stride padded_vocab(), the first vocab_size columns real.
  LogitsView last_logits() const override;

 private:
  struct Activations;
  Activations& activations_for(int64_t B, int64_t T);

  // Where each parameter sits in specs_ (llm.c's ParameterTensors, as indices): set once, as
  // the specs are declared, and the only way the compute code finds a parameter.
  struct BlockParams {
    size_t ln_1_weight, ln_1_bias, c_attn_weight, c_attn_bias, attn_proj_weight, attn_proj_bias;
    size_t ln_2_weight, ln_2_bias, c_fc_weight, c_fc_bias, mlp_proj_weight, mlp_proj_bias;
  };
  struct ParamIndex {
    size_t wte = 0, wpe = 0;
    std::vector<BlockParams> h;
    size_t ln_f_weight = 0, ln_f_bias = 0;
  };
  // The compute-dtype value and the FP32 gradient of parameter `index`.
  const void* w(size_t index) const { return param(index).value.raw(); }
  float* g(size_t index) const { return param(index).grad.data<float>(); }

  void embed_forward(Activations& a, const Batch& batch);
  int64_t num_blocks() const override { return config_.n_layer; }
  void block_forward(int64_t layer, const BlockPass& pass) override;
  void block_backward(int64_t layer) override;
  // Logits and per-token losses; returns their sum.
  double head_forward(Activations& a, const Batch& batch);
  // Gradient of the loss through the logits and ln_f into a.dx.
  void head_backward(Activations& a, const Batch& batch, float grad_scale);
  void embed_backward(Activations& a, const Batch& batch);
  LmHeadShape head_shape(const Activations& a) const;

  GPTConfig config_;
  DType dtype_;
  std::vector<ParamSpec> specs_;
  ParamIndex p_;
  std::unique_ptr<Activations> acts_;
};

}  // namespace st
