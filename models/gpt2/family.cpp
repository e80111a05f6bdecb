// GPT-2 as a model family: no keys of its own, Hugging Face's GPT2LMHeadModel config.json.
#include <cmath>

#include "core/ops/layernorm.hpp"
#include "models/family.hpp"
#include "models/gpt2/gpt.hpp"

namespace st {
namespace {

GPTConfig gpt_config(const ModelConfig& c) {
  GPTConfig g;
  g.n_layer = c.n_layer, g.n_embd = c.n_embd, g.n_head = c.n_head;
  g.block_size = c.block_size, g.vocab_size = c.vocab_size;
  g.padded_vocab_size = c.padded_vocab_size;
  return g;
}

// Nothing beyond the checks every family's keys get.
void validate_gpt2(const ModelConfig&) {}

std::unique_ptr<Model> build_gpt2(const ModelConfig& c, DType dtype) {
  return std::make_unique<GPT>(gpt_config(c), dtype);
}

// Megatron's layout (models/gpt2/parallelize.cpp) splits the heads, the MLP's 4·n_embd and the
// padded vocabulary.
void check_gpt2_tensor_parallel(const ModelConfig& c, int64_t tp) {
  check_tp_divides(tp, "model.n_head", c.n_head, "the attention heads");
  check_tp_divides(tp, "model.padded_vocab_size", c.padded_vocab(),
                   "the vocabulary-parallel embedding and head");
}

std::unique_ptr<Model> build_gpt2_slice(const ModelConfig& c, DType dtype, TpSlice slice) {
  return std::make_unique<GPT>(gpt_config(c), dtype, slice);
}

void gpt2_to_meta(const ModelConfig&, nlohmann::json&) {}
void gpt2_from_meta(const nlohmann::json&, ModelConfig&, const std::string&) {}

// Byte or GPT-2 vocabulary, tied lm_head, the tanh GELU.
nlohmann::ordered_json gpt2_hf_config(const ModelConfig& c, DType dtype) {
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"vocab_size", c.vocab_size},
          {"n_positions", c.block_size},
          {"n_ctx", c.block_size},
          {"n_embd", c.n_embd},
          {"n_layer", c.n_layer},
          {"n_head", c.n_head},
          {"activation_function", "gelu_new"},
          {"layer_norm_epsilon", 1e-5},  // kLayerNormEps
          {"resid_pdrop", 0.0},
          {"embd_pdrop", 0.0},
          {"attn_pdrop", 0.0},
          {"tie_word_embeddings", true},
          {"torch_dtype", dtype == DType::bf16 ? "bfloat16" : "float32"}};
}

ModelConfig gpt2_from_hf_config(const nlohmann::json& j, const std::string& where) {
  ModelConfig c;
  c.n_layer = json_int_at(j, "n_layer", where);
  c.n_embd = json_int_at(j, "n_embd", where);
  c.n_head = json_int_at(j, "n_head", where);
  c.block_size = json_int_at(j, "n_positions", where);
  c.vocab_size = json_int_at(j, "vocab_size", where);
  // What transformers' GPT-2 would compute differently from this one is refused by name.
  if (j.contains("activation_function") && j["activation_function"] != "gelu_new" &&
      j["activation_function"] != "gelu_pytorch_tanh")
    fail_input("{}: activation_function = {} is not supported (GPT-2's tanh GELU, gelu_new, only)",
               where, j["activation_function"].dump());
  if (j.contains("tie_word_embeddings") && j["tie_word_embeddings"] != true)
    fail_input("{}: tie_word_embeddings = {} is not supported (GPT-2's head is the embedding)",
               where, j["tie_word_embeddings"].dump());
  if (j.contains("n_inner") && !j["n_inner"].is_null() &&
      json_int_at(j, "n_inner", where, 1, INT64_MAX) != 4 * c.n_embd)
    fail_input("{}: n_inner = {} is not supported (GPT-2's MLP is 4 x n_embd = {} wide)", where,
               j["n_inner"].dump(), 4 * c.n_embd);
  // The LayerNorms use kLayerNormEps: another epsilon would give another model than the file's.
  if (j.contains("layer_norm_epsilon") && !j["layer_norm_epsilon"].is_null()) {
    const double eps = json_number_at(j, "layer_norm_epsilon", where);
    if (std::abs(eps - double(kLayerNormEps)) > 1e-6 * double(kLayerNormEps))
      fail_input("{}: layer_norm_epsilon = {} is not supported (this GPT-2's LayerNorm uses {:g})",
                 where, j["layer_norm_epsilon"].dump(), double(kLayerNormEps));
  }
  for (const char* key : {"scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"})
    if (j.contains(key) && j[key] == true) fail_input("{}: {} = true is not supported", where, key);
  return c;
}

}  // namespace

const ModelFamily& gpt2_family() {
  static const ModelFamily family{
      .name = "gpt2",
      .display_name = "GPT",
      .description = "GPT-2 (learned positions, LayerNorm, a GELU MLP, biases)",
      .own_keys = {},
      .validate = validate_gpt2,
      .build = build_gpt2,
      .check_tensor_parallel = check_gpt2_tensor_parallel,
      .build_slice = build_gpt2_slice,
      .to_meta = gpt2_to_meta,
      .from_meta = gpt2_from_meta,
      .hf_model_type = "gpt2",
      .hf_config = gpt2_hf_config,
      .from_hf_config = gpt2_from_hf_config};
  return family;
}

}  // namespace st
