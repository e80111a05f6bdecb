#pragma once
// Llama's architecture as Hugging Face's LlamaForCausalLM computes it, with explicit
// forward/backward pairs per block: token embedding; L blocks of x + attn(rmsnorm(x)) and
// x + mlp(rmsnorm(x)); rotary positions on q and k (rotate_half); grouped-query attention;
// a SwiGLU MLP down(silu(gate(x)) · up(x)); no biases; a final RMSNorm; an output head tied to
// the embedding or not. Weights are stored as Hugging Face stores them (nn.Linear's [out, in])
// and read through transposed views, so import and export are identities.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/data/tokenizer.hpp"
#include "core/model/decoder_model.hpp"
#include "core/ops/attention.hpp"
#include "core/ops/linear.hpp"
#include "core/ops/lm_head.hpp"
#include "core/ops/rope.hpp"

namespace st {

struct LlamaConfig {
  int64_t n_layer = 4;
  int64_t n_embd = 256;
  int64_t n_head = 4;
  int64_t n_kv_head = 2;     // key/value heads, dividing n_head (grouped-query attention)
  int64_t head_dim = 0;      // each head's width; 0: n_embd / n_head (Qwen3: 128 at 1024 / 16)
  int64_t ffn_hidden = 768;  // the SwiGLU MLP's hidden width
  int64_t block_size = 256;
  int64_t vocab_size = kByteVocabSize;
  int64_t padded_vocab_size = 0;  // as GPTConfig's: 0 rounds vocab_size up to a multiple of 128
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
  bool tie_embeddings = true;
  bool qkv_bias = false;       // Qwen2: the q, k and v projections have biases
  bool qk_norm = false;        // Qwen3: an RMSNorm over each q and k head, before the rotation
  const char* name = "Llama";  // in describe(): the family's architecture ("Qwen3")
  int64_t padded_vocab() const { return st::padded_vocab(vocab_size, padded_vocab_size); }
  int64_t head_size() const { return head_dim > 0 ? head_dim : n_embd / n_head; }
};

struct LlamaActivations;  // llama.cpp
extern template class DecoderModel<LlamaConfig, LlamaActivations>;

class Llama final : public DecoderModel<LlamaConfig, LlamaActivations> {
 public:
  // `slice`: built of tensor-parallel rank slice.rank's slices of every parameter (Megatron's
  // layout: models/llama/parallelize.cpp), run with set_tensor_parallel's group of slice.ranks.
  Llama(const LlamaConfig& config, DType compute_dtype, TpSlice slice = {});
  ~Llama() override;

  double flops_per_token() const override;
  std::array<int64_t, 3> largest_matmul(int64_t tokens) const override;
  ModelWork work(int64_t B, int64_t T) const override;
  std::string describe() const override;
  std::vector<std::pair<std::string, int64_t>> hyperparameters() const override;

 private:
  using Activations = LlamaActivations;

  // Where each parameter sits in specs_, set once as the specs are declared.
  struct BlockParams {
    size_t input_norm, q, k, v, o, post_norm, gate, up, down;
    size_t q_bias = 0, k_bias = 0, v_bias = 0;  // with qkv_bias
    size_t q_norm = 0, k_norm = 0;              // with qk_norm
  };
  // The q, k, v projections, forward (gradients null) or backward.
  std::array<LinearPart, 3> qkv_parts(const BlockParams& p, bool backward);
  struct ParamIndex {
    size_t embed = 0;
    std::vector<BlockParams> layers;
    size_t norm = 0;
    size_t head = 0;  // lm_head, or embed when tied
  };

  // This rank's query and KV heads, their widths (heads x head size), the MLP's width.
  struct Widths {
    int64_t heads, kv_heads, q, kv, ffn;
  };
  Widths widths() const;
  void projection_residual(float* out_x, const float* x_in, const void* in, size_t weight,
                           int64_t M, int64_t K);

  void embed_forward(Activations& a, const Batch& batch) override;
  void block_forward(int64_t layer, const BlockPass& pass) override;
  void block_backward(int64_t layer) override;
  double head_forward(Activations& a, const Batch& batch) override;
  void head_backward(Activations& a, const Batch& batch, float grad_scale) override;
  void embed_backward(Activations& a, const Batch& batch) override;

  ParamIndex p_;
};

}  // namespace st
