// Qwen2 and Qwen3 as model families: Llama's block with what each adds (Qwen2: biases on q, k
// and v; Qwen3: an RMSNorm over each q and k head before the rotation, heads head_dim wide), and
// Llama's keys (models/llama/llama_family.hpp), read from and written to Hugging Face's
// Qwen2ForCausalLM / Qwen3ForCausalLM config.json.
#include "models/family.hpp"
#include "models/llama/llama_family.hpp"

namespace st {
namespace {

constexpr LlamaVariant kQwen2{"qwen2", "Qwen2", "Qwen2ForCausalLM", "qwen2", true, false, 0};
// transformers' Qwen3Config has head_dim = 128 when config.json gives none.
constexpr LlamaVariant kQwen3{"qwen3", "Qwen3", "Qwen3ForCausalLM", "qwen3", false, true, 128};

template <const LlamaVariant& V>
std::unique_ptr<Model> build(const ModelConfig& c, DType dtype) {
  return build_llama(c, dtype, V);
}
template <const LlamaVariant& V>
std::unique_ptr<Model> build_slice(const ModelConfig& c, DType dtype, TpSlice slice) {
  return build_llama(c, dtype, V, slice);
}
template <const LlamaVariant& V>
nlohmann::ordered_json hf_config(const ModelConfig& m, DType dtype) {
  return llama_hf_config(m, dtype, V);
}
template <const LlamaVariant& V>
ModelConfig from_hf_config(const nlohmann::json& j, const std::string& where) {
  return llama_from_hf_config(j, where, V);
}

template <const LlamaVariant& V>
ModelFamily qwen_family(const char* description) {
  return ModelFamily{.name = V.family,
                     .display_name = V.family,
                     .description = description,
                     .own_keys = llama_own_keys(),
                     .validate = validate_llama,
                     .build = build<V>,
                     .check_tensor_parallel = check_llama_tensor_parallel,
                     .build_slice = build_slice<V>,
                     .to_meta = llama_to_meta,
                     .from_meta = llama_from_meta,
                     .hf_model_type = V.model_type,
                     .hf_config = hf_config<V>,
                     .from_hf_config = from_hf_config<V>};
}

}  // namespace

const ModelFamily& qwen2_family() {
  static const ModelFamily family =
      qwen_family<kQwen2>("Qwen2 (Llama with biases on the q, k and v projections)");
  return family;
}

const ModelFamily& qwen3_family() {
  static const ModelFamily family = qwen_family<kQwen3>(
      "Qwen3 (Llama with an RMSNorm over each q and k head; heads `model.head_dim` wide)");
  return family;
}

}  // namespace st
