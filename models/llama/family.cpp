// Llama as a model family: its own keys (LlamaKeys: n_kv_head, head_dim, ffn_hidden, rope_theta,
// norm_eps, tie_embeddings) and Hugging Face's LlamaForCausalLM config.json.
#include <cmath>

#include "models/family.hpp"
#include "models/llama/llama.hpp"
#include "models/llama/llama_family.hpp"
#include "models/llama/llama_keys.hpp"
#include "models/own_keys.hpp"

namespace st {
namespace {

const OwnKeys<LlamaKeys>& keys() {
  static const OwnKeys<LlamaKeys> keys({
      {"model.n_kv_head", &LlamaKeys::n_kv_head, "0, or a divisor of `model.n_head`",
       "key/value heads (grouped-query attention); 0: `n_head`"},
      {"model.head_dim", &LlamaKeys::head_dim, "0, or an even width up to 65536",
       "each attention head's width (q, k, v are `n_head`·`head_dim` wide); 0: "
       "`n_embd`/`n_head`"},
      {"model.ffn_hidden", &LlamaKeys::ffn_hidden, "0 – 1048576",
       "the SwiGLU MLP's hidden width; 0: 8·`n_embd`/3 rounded up to a multiple of 256"},
      {"model.rope_theta", &LlamaKeys::rope_theta, "> 0",
       "the base of the rotary embeddings' frequencies"},
      {"model.norm_eps", &LlamaKeys::norm_eps, "0 < x < 1", "RMSNorm's epsilon"},
      {"model.tie_embeddings", &LlamaKeys::tie_embeddings, "true, false",
       "the output head is the token embedding (no `lm_head.weight`)"},
  });
  return keys;
}

int64_t kv_heads(const ModelConfig& m, const LlamaKeys& c) {
  return c.n_kv_head > 0 ? c.n_kv_head : m.n_head;
}

// Llama's rule, 8C/3 rounded up to a multiple of 256 (its `multiple_of`).
int64_t ffn_width(const ModelConfig& m, const LlamaKeys& c) {
  return c.ffn_hidden > 0 ? c.ffn_hidden : (8 * m.n_embd / 3 + 255) / 256 * 256;
}

LlamaConfig llama_config(const ModelConfig& m) {
  const LlamaKeys c = llama_keys(m);
  LlamaConfig l;
  l.n_layer = m.n_layer, l.n_embd = m.n_embd, l.n_head = m.n_head, l.n_kv_head = kv_heads(m, c);
  l.head_dim = c.head_dim;
  l.ffn_hidden = ffn_width(m, c), l.block_size = m.block_size, l.vocab_size = m.vocab_size;
  l.padded_vocab_size = m.padded_vocab_size, l.rope_theta = c.rope_theta;
  l.norm_eps = c.norm_eps, l.tie_embeddings = c.tie_embeddings;
  return l;
}

}  // namespace

// After the checks every family's keys get (n_embd divisible by n_head among them).
void validate_llama(const ModelConfig& m) {
  const LlamaKeys c = llama_keys(m);
  if (c.head_dim < 0 || c.head_dim > (1 << 16) || c.head_dim % 2 != 0)
    fail_input(
        "model.head_dim = {} must be 0 (n_embd / n_head) or an even width up to 65536: rotary "
        "embeddings rotate pairs of a head's channels",
        c.head_dim);
  if (c.head_dim == 0 && (m.n_embd / m.n_head) % 2 != 0)
    fail_input(
        "model.n_embd / model.n_head = {} must be even: rotary embeddings rotate pairs of a "
        "head's channels",
        m.n_embd / m.n_head);
  if (c.n_kv_head < 0 || c.n_kv_head > m.n_head || (c.n_kv_head > 0 && m.n_head % c.n_kv_head))
    fail_input(
        "model.n_kv_head = {} must divide model.n_head = {} (query heads share kv heads in "
        "equal groups); 0 means n_head",
        c.n_kv_head, m.n_head);
  if (c.ffn_hidden < 0 || c.ffn_hidden > (1 << 20))
    fail_input(
        "model.ffn_hidden = {} must be in [0, {}] (0: 8·n_embd/3 rounded up to a multiple of 256)",
        c.ffn_hidden, 1 << 20);
  if (!(c.rope_theta > 0) || !std::isfinite(c.rope_theta))
    fail_input("model.rope_theta = {} must be a positive number", c.rope_theta);
  if (!(c.norm_eps > 0 && c.norm_eps < 1))
    fail_input("model.norm_eps = {} must be in (0, 1)", c.norm_eps);
}

std::unique_ptr<Model> build_llama(const ModelConfig& c, DType dtype, const LlamaVariant& v,
                                   TpSlice slice) {
  LlamaConfig l = llama_config(c);
  l.qkv_bias = v.qkv_bias;
  l.qk_norm = v.qk_norm;
  l.name = v.name;
  return std::make_unique<Llama>(l, dtype, slice);
}

void check_llama_tensor_parallel(const ModelConfig& c, int64_t tp) {
  const LlamaConfig l = llama_config(c);  // n_kv_head and ffn_hidden resolved
  check_tp_divides(tp, "model.n_head", c.n_head, "the query heads");
  // Fewer KV heads than ranks: each rank keeps the one its query heads use, which needs the
  // KV heads to divide the ranks.
  if (l.n_kv_head < tp && tp % l.n_kv_head != 0)
    fail_input(
        "parallel.tp = {} and model.n_kv_head = {}: with fewer key/value heads than TP ranks, "
        "each rank keeps the one its query heads use, so n_kv_head must divide tp",
        tp, l.n_kv_head);
  if (l.n_kv_head >= tp)
    check_tp_divides(tp, "model.n_kv_head", l.n_kv_head, "the key/value heads");
  check_tp_divides(tp, "model.ffn_hidden", l.ffn_hidden, "the MLP's hidden width");
  check_tp_divides(tp, "model.padded_vocab_size", c.padded_vocab(),
                   "the vocabulary-parallel embedding and head");
}

// n_kv_head, ffn_hidden and tie_embeddings come with Model::hyperparameters().
void llama_to_meta(const ModelConfig& m, nlohmann::json& model) {
  const LlamaKeys c = llama_keys(m);
  model["rope_theta"] = c.rope_theta;
  model["norm_eps"] = c.norm_eps;
  // Only when set: checkpoints of heads n_embd / n_head wide are recorded as before.
  if (c.head_dim > 0) model["head_dim"] = c.head_dim;
}

void llama_from_meta(const nlohmann::json& j, ModelConfig& m, const std::string& where) {
  LlamaKeys c;
  c.n_kv_head = json_int_at(j, "n_kv_head", where, 1, 1 << 17);
  c.ffn_hidden = json_int_at(j, "ffn_hidden", where, 1, 1 << 20);
  c.tie_embeddings = json_int_at(j, "tie_embeddings", where, 0, 1) == 1;
  c.rope_theta = json_number_at(j, "rope_theta", where);
  c.norm_eps = json_number_at(j, "norm_eps", where);
  if (j.contains("head_dim")) c.head_dim = json_int_at(j, "head_dim", where, 2, 1 << 16);
  keys().write(c, m);
}

nlohmann::ordered_json llama_hf_config(const ModelConfig& m, DType dtype, const LlamaVariant& v) {
  const LlamaKeys c = llama_keys(m);
  nlohmann::ordered_json config = {{"architectures", {v.architecture}},
                                   {"model_type", v.model_type},
                                   {"vocab_size", m.vocab_size},
                                   {"hidden_size", m.n_embd},
                                   {"intermediate_size", ffn_width(m, c)},
                                   {"num_hidden_layers", m.n_layer},
                                   {"num_attention_heads", m.n_head},
                                   {"num_key_value_heads", kv_heads(m, c)},
                                   {"max_position_embeddings", m.block_size},
                                   {"rms_norm_eps", c.norm_eps},
                                   {"rope_theta", c.rope_theta},
                                   {"hidden_act", "silu"}};
  // Qwen2's biases are not a key (its q, k and v always have them); mlp_bias is Llama's alone.
  if (!v.qkv_bias) config["attention_bias"] = false;
  if (!v.qkv_bias && !v.qk_norm) config["mlp_bias"] = false;
  config["tie_word_embeddings"] = c.tie_embeddings;
  config["torch_dtype"] = dtype == DType::bf16 ? "bfloat16" : "float32";
  if (v.qkv_bias || v.qk_norm) config["use_sliding_window"] = false;
  // Written where transformers' default for the type would differ (so exports of Llamas with
  // heads hidden / heads wide stay byte for byte what they were).
  const int64_t head_dim = c.head_dim > 0 ? c.head_dim : m.n_embd / m.n_head;
  if (c.head_dim > 0 || v.hf_default_head_dim > 0) config["head_dim"] = head_dim;
  return config;
}

namespace {

// Keys transformers' Llama honours that would change the model this family computes: each is
// refused by name unless it says what the family does anyway (a key read and then ignored would
// give another model than the file describes).
void refuse_what_llama_does_not_compute(const nlohmann::json& j, const ModelConfig& m,
                                        const std::string& where, const LlamaVariant& v) {
  auto is_true = [&](const char* key) {
    return j.contains(key) && !(j[key].is_boolean() && !j[key].get<bool>()) && !j[key].is_null();
  };
  // Qwen2 ignores attention_bias (its q, k and v always have biases, o never); Llama's and
  // Qwen3's put a bias on o_proj too, which this block has not.
  for (const char* key : {"attention_bias", "mlp_bias"})
    if (is_true(key) && !(v.qkv_bias && key == std::string("attention_bias")))
      fail_input("{}: {} = {} is not supported (this Llama has no biases)", where, key,
                 j[key].dump());
  for (const char* key : {"hidden_act", "hidden_activation"})
    if (j.contains(key) && j[key] != "silu")
      fail_input("{}: {} = {} is not supported (SwiGLU's silu only)", where, key, j[key].dump());
  // A window narrower than the context changes attention (transformers applies it only with
  // use_sliding_window where that key exists).
  if (j.contains("sliding_window") && !j["sliding_window"].is_null() &&
      !(j.contains("use_sliding_window") && j["use_sliding_window"] == false)) {
    const int64_t window = json_int_at(j, "sliding_window", where, 0, INT64_MAX);
    if (window < m.block_size)
      fail_input(
          "{}: sliding_window = {} (narrower than max_position_embeddings = {}) is not "
          "supported: full causal attention only",
          where, window, m.block_size);
  }
}

}  // namespace

ModelConfig llama_from_hf_config(const nlohmann::json& j, const std::string& where,
                                 const LlamaVariant& v) {
  ModelConfig m;
  LlamaKeys c;
  m.family = v.family;
  m.n_layer = json_int_at(j, "num_hidden_layers", where);
  m.n_embd = json_int_at(j, "hidden_size", where);
  m.n_head = json_int_at(j, "num_attention_heads", where);
  c.n_kv_head =
      j.contains("num_key_value_heads") ? json_int_at(j, "num_key_value_heads", where) : m.n_head;
  c.ffn_hidden = json_int_at(j, "intermediate_size", where, 1, 1 << 20);
  m.block_size = json_int_at(j, "max_position_embeddings", where);
  m.vocab_size = json_int_at(j, "vocab_size", where);
  if (j.contains("rms_norm_eps")) c.norm_eps = json_number_at(j, "rms_norm_eps", where);
  if (j.contains("rope_theta")) c.rope_theta = json_number_at(j, "rope_theta", where);
  // Heads of their own width (Qwen3's 128 at hidden 1024 with 16 heads); hidden / heads is the
  // default, recorded as 0.
  const int64_t head_dim = j.contains("head_dim") && !j["head_dim"].is_null()
                               ? json_int_at(j, "head_dim", where, 1, 1 << 16)
                               : v.hf_default_head_dim;
  if (head_dim > 0 && (m.n_head <= 0 || head_dim * m.n_head != m.n_embd)) c.head_dim = head_dim;
  if (j.contains("tie_word_embeddings")) {
    if (!j["tie_word_embeddings"].is_boolean())
      fail_input("{}: tie_word_embeddings = {} must be true or false", where,
                 j["tie_word_embeddings"].dump());
    c.tie_embeddings = j["tie_word_embeddings"].get<bool>();
  }
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
    fail_input("{}: rope_scaling = {} is not supported (plain rotary embeddings only)", where,
               j["rope_scaling"].dump());
  refuse_what_llama_does_not_compute(j, m, where, v);
  keys().write(c, m);
  return m;
}

LlamaKeys llama_keys(const ModelConfig& config) {
  return keys().read(config);
}

std::vector<OwnKey> llama_own_keys() {
  return keys().describe();
}

namespace {

constexpr LlamaVariant kLlama{"llama", "Llama", "LlamaForCausalLM", "llama"};

std::unique_ptr<Model> build_plain_llama(const ModelConfig& c, DType dtype) {
  return build_llama(c, dtype, kLlama);
}
std::unique_ptr<Model> build_plain_llama_slice(const ModelConfig& c, DType dtype, TpSlice slice) {
  return build_llama(c, dtype, kLlama, slice);
}
nlohmann::ordered_json plain_llama_hf_config(const ModelConfig& m, DType dtype) {
  return llama_hf_config(m, dtype, kLlama);
}
ModelConfig plain_llama_from_hf_config(const nlohmann::json& j, const std::string& where) {
  return llama_from_hf_config(j, where, kLlama);
}

}  // namespace

const ModelFamily& llama_family() {
  static const ModelFamily family{
      .name = "llama",
      .display_name = "llama",
      .description =
          "Llama (RMSNorm, rotary embeddings, SwiGLU, grouped-query attention, no biases)",
      .own_keys = keys().describe(),
      .validate = validate_llama,
      .build = build_plain_llama,
      .check_tensor_parallel = check_llama_tensor_parallel,
      .build_slice = build_plain_llama_slice,
      .to_meta = llama_to_meta,
      .from_meta = llama_from_meta,
      .hf_model_type = "llama",
      .hf_config = plain_llama_hf_config,
      .from_hf_config = plain_llama_from_hf_config};
  return family;
}

}  // namespace st
