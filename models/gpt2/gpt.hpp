#pragma once
// GPT-2's architecture with explicit forward/backward pairs per block (llm.c style).
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/data/tokenizer.hpp"
#include "core/model/decoder_model.hpp"
#include "core/ops/attention.hpp"
#include "core/ops/lm_head.hpp"
#include "core/ops/vocab_parallel_loss.hpp"

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

struct GPTActivations;  // gpt.cpp
extern template class DecoderModel<GPTConfig, GPTActivations>;

class GPT final : public DecoderModel<GPTConfig, GPTActivations> {
 public:
  // `slice`: built of tensor-parallel rank slice.rank's slices of every parameter (Megatron's
  // layout: models/gpt2/parallelize.cpp), run with set_tensor_parallel's group of slice.ranks.
  GPT(const GPTConfig& config, DType compute_dtype, TpSlice slice = {});
  ~GPT() override;

  double flops_per_token() const override;
  std::array<int64_t, 3> largest_matmul(int64_t tokens) const override;
  ModelWork work(int64_t B, int64_t T) const override;
  std::string describe() const override;
  std::vector<std::pair<std::string, int64_t>> hyperparameters() const override;

 private:
  using Activations = GPTActivations;

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

  void embed_forward(Activations& a, const Batch& batch) override;
  void block_forward(int64_t layer, const BlockPass& pass) override;
  void block_backward(int64_t layer) override;
  double head_forward(Activations& a, const Batch& batch) override;
  void head_backward(Activations& a, const Batch& batch, float grad_scale) override;
  void embed_backward(Activations& a, const Batch& batch) override;
  void projection_residual(float* out_x, const float* x_in, const void* in, size_t weight,
                           size_t bias, int64_t M, int64_t K);

  ParamIndex p_;
};

}  // namespace st
