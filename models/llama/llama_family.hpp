#pragma once
// What the families built on Llama's block share (llama, and Qwen's in models/qwen/): its own
// keys (LlamaKeys), checks, builder, checkpoint record and Hugging Face config.json both ways,
// each parameterized by what a variant adds to the block. A family built on it registers small
// wrappers of these (a ModelFamily holds plain function pointers).
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/family.hpp"

namespace st {

struct LlamaVariant {
  const char* family;        // model.family: "llama"
  const char* name;          // the model's name in its description: "Llama"
  const char* architecture;  // config.json's architectures[0]: "LlamaForCausalLM"
  const char* model_type;    // config.json's model_type: "llama"
  bool qkv_bias = false;     // biases on q, k and v (Qwen2)
  bool qk_norm = false;      // an RMSNorm over each q and k head (Qwen3)
  // The head width transformers assumes when config.json has no head_dim (Qwen3's 128); 0:
  // hidden_size / num_attention_heads.
  int64_t hf_default_head_dim = 0;
};

// The keys every Llama-based family reads (the same names and meanings in each).
std::vector<OwnKey> llama_own_keys();
void validate_llama(const ModelConfig& config);
std::unique_ptr<Model> build_llama(const ModelConfig& config, DType dtype,
                                   const LlamaVariant& variant, TpSlice slice = {});
// Megatron's layout splits the query and KV heads (each rank keeps the KV heads its query heads
// use; fewer KV heads than ranks is refused), the MLP's width and the padded vocabulary.
void check_llama_tensor_parallel(const ModelConfig& config, int64_t tp);
void llama_to_meta(const ModelConfig& config, nlohmann::json& model);
void llama_from_meta(const nlohmann::json& model, ModelConfig& config, const std::string& where);
nlohmann::ordered_json llama_hf_config(const ModelConfig& config, DType dtype,
                                       const LlamaVariant& variant);
ModelConfig llama_from_hf_config(const nlohmann::json& j, const std::string& where,
                                 const LlamaVariant& variant);

}  // namespace st
