// Model families through their registration: Hugging Face's config.json read for each family
// (and refused where shardtrain cannot honour it), and a checkpoint's record of the model read
// back to the same shape.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "core/json_parse.hpp"
#include "launch/config.hpp"
#include "launch/model_factory.hpp"
#include "models/llama/llama_keys.hpp"
#include "tests/temp_dir.hpp"

namespace st {
namespace {

// What transformers writes for a small LlamaForCausalLM.
nlohmann::json hf_llama() {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"hidden_size", 64},
          {"intermediate_size", 160},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"max_position_embeddings", 32},
          {"rms_norm_eps", 1e-6},
          {"rope_theta", 500000.0},
          {"vocab_size", 300},
          {"tie_word_embeddings", false},
          {"rope_scaling", nullptr},
          {"torch_dtype", "bfloat16"}};
}

void expect_config_refused(const nlohmann::json& j, const std::string& words) {
  try {
    model_config_from_hf(j, "config.json");
    FAIL() << "expected an InputError with '" << words << "'";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(ModelFamily, ReadsHuggingFaceLlamaConfig) {
  const ModelConfig c = model_config_from_hf(hf_llama(), "config.json");
  EXPECT_EQ(c.family, "llama");
  EXPECT_EQ(c.n_layer, 2);
  EXPECT_EQ(c.n_embd, 64);
  EXPECT_EQ(c.n_head, 4);
  const LlamaKeys own = llama_keys(c);
  EXPECT_EQ(own.n_kv_head, 2);
  EXPECT_EQ(own.ffn_hidden, 160);
  EXPECT_EQ(c.block_size, 32);
  EXPECT_EQ(c.vocab_size, 300);
  EXPECT_EQ(own.norm_eps, 1e-6);
  EXPECT_EQ(own.rope_theta, 500000.0);
  EXPECT_FALSE(own.tie_embeddings);
  // Without num_key_value_heads every head has its own kv head (as transformers reads it).
  nlohmann::json mha = hf_llama();
  mha.erase("num_key_value_heads");
  EXPECT_EQ(llama_keys(model_config_from_hf(mha, "config.json")).n_kv_head, 4);
}

TEST(ModelFamily, RefusesWhatItCannotHonour) {
  nlohmann::json j = hf_llama();
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  expect_config_refused(j, "rope_scaling");
  j = hf_llama();
  j["tie_word_embeddings"] = "yes";
  expect_config_refused(j, "tie_word_embeddings = \"yes\" must be true or false");
  j = hf_llama();
  j["num_key_value_heads"] = 3;
  expect_config_refused(j, "model.n_kv_head = 3 must divide model.n_head = 4");
  j = hf_llama();
  j["model_type"] = "mistral";
  expect_config_refused(
      j, "model_type = \"mistral\" is not one shardtrain reads (gpt2, llama, qwen2, qwen3)");
  j = hf_llama();
  j.erase("hidden_size");
  expect_config_refused(j, "'hidden_size' is missing");
}

// Keys that would make transformers compute another model than the family's are refused by
// name, never read and ignored; the values that say what the family does anyway are accepted.
TEST(ModelFamily, RefusesKeysThatWouldChangeTheModel) {
  for (const auto& [key, value, words] :
       std::vector<std::tuple<std::string, nlohmann::json, std::string>>{
           {"attention_bias", true, "attention_bias = true is not supported"},
           {"mlp_bias", true, "mlp_bias = true is not supported"},
           {"hidden_act", "gelu", "hidden_act = \"gelu\" is not supported"},
           {"sliding_window", 16,
            "sliding_window = 16 (narrower than max_position_embeddings = 32)"}}) {
    nlohmann::json bad = hf_llama();
    bad[key] = value;
    expect_config_refused(bad, words);
  }
  nlohmann::json j = hf_llama();
  j.erase("model_type");
  expect_config_refused(j, "config.json has no model_type");
  // Heads of their own width are read (Qwen3's layout), hidden / heads recorded as the default.
  j = hf_llama();
  j["head_dim"] = 32;
  EXPECT_EQ(llama_keys(model_config_from_hf(j, "config.json")).head_dim, 32);
  j["head_dim"] = 16;
  EXPECT_EQ(llama_keys(model_config_from_hf(j, "config.json")).head_dim, 0);
  // What the family computes anyway.
  j = hf_llama();
  j["attention_bias"] = false;
  j["mlp_bias"] = false;
  j["hidden_act"] = "silu";
  j["head_dim"] = 16;
  j["sliding_window"] = 16;
  j["use_sliding_window"] = false;
  EXPECT_EQ(model_config_from_hf(j, "config.json").n_embd, 64);
  j["sliding_window"] = 4096;
  j.erase("use_sliding_window");
  EXPECT_EQ(model_config_from_hf(j, "config.json").n_embd, 64);
  nlohmann::json g = {{"model_type", "gpt2"}, {"n_layer", 1},      {"n_embd", 48},
                      {"n_head", 4},          {"n_positions", 64}, {"vocab_size", 256}};
  for (const auto& [key, value, words] :
       std::vector<std::tuple<std::string, nlohmann::json, std::string>>{
           {"activation_function", "relu", "activation_function = \"relu\" is not supported"},
           {"tie_word_embeddings", false, "tie_word_embeddings = false is not supported"},
           {"n_inner", 100, "n_inner = 100 is not supported"},
           {"scale_attn_by_inverse_layer_idx", true, "scale_attn_by_inverse_layer_idx"}}) {
    nlohmann::json bad = g;
    bad[key] = value;
    expect_config_refused(bad, words);
  }
  g["activation_function"] = "gelu_new";
  g["n_inner"] = nullptr;
  EXPECT_EQ(model_config_from_hf(g, "config.json").n_embd, 48);
}

// A config.json nested thousands deep is refused whole, at once.
TEST(ModelFamily, RefusesAbsurdlyNestedJson) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  try {
    parse_json_object("{\"a\": " + deep + "}", "config.json");
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("config.json nests deeper than 64 levels"),
              std::string::npos)
        << e.what();
  }
}

// A config.json of megabytes is not a model's: refused before it is read (not parsed for
// seconds into gigabytes).
TEST(ModelFamily, RefusesAHugeConfigJsonUnread) {
  const testing::ScopedTempDir dir;
  {
    std::ofstream out(dir.path("config.json"));
    out << "{\"model_type\": \"llama\", \"pad\": \"" << std::string(5 << 20, 'x') << "\"}";
  }
  try {
    model_config_beside(dir.path("model.safetensors"));
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bytes: not a model's config.json"), std::string::npos)
        << e.what();
  }
}

// Qwen3-0.6B's config.json as transformers writes it, and Qwen2's: the families built on
// Llama's block, with what each adds; an export's config.json reads back to the same model.
TEST(ModelFamily, ReadsAndWritesHuggingFaceQwenConfigs) {
  nlohmann::json q3 = {{"architectures", {"Qwen3ForCausalLM"}},
                       {"model_type", "qwen3"},
                       {"hidden_size", 1024},
                       {"intermediate_size", 3072},
                       {"num_hidden_layers", 28},
                       {"num_attention_heads", 16},
                       {"num_key_value_heads", 8},
                       {"head_dim", 128},
                       {"max_position_embeddings", 40960},
                       {"rms_norm_eps", 1e-6},
                       {"rope_theta", 1000000},
                       {"rope_scaling", nullptr},
                       {"hidden_act", "silu"},
                       {"attention_bias", false},
                       {"use_sliding_window", false},
                       {"sliding_window", nullptr},
                       {"max_window_layers", 28},
                       {"tie_word_embeddings", true},
                       {"vocab_size", 151936},
                       {"torch_dtype", "bfloat16"}};
  const ModelConfig c = model_config_from_hf(q3, "config.json");
  EXPECT_EQ(c.family, "qwen3");
  EXPECT_EQ(c.n_embd, 1024);
  const LlamaKeys own = llama_keys(c);
  EXPECT_EQ(own.head_dim, 128);  // 1024 / 16 = 64: heads of their own width
  EXPECT_EQ(own.n_kv_head, 8);
  EXPECT_EQ(own.rope_theta, 1e6);
  EXPECT_TRUE(own.tie_embeddings);
  // transformers' Qwen3Config defaults head_dim to 128, whatever hidden / heads is.
  q3.erase("head_dim");
  q3["hidden_size"] = 512;
  EXPECT_EQ(llama_keys(model_config_from_hf(q3, "config.json")).head_dim, 128);
  q3["attention_bias"] = true;  // Qwen3's o_proj would have a bias too
  expect_config_refused(q3, "attention_bias = true is not supported");
  // Qwen2: q, k and v always have biases (attention_bias is not its key); heads hidden / heads.
  nlohmann::json q2 = hf_llama();
  q2["model_type"] = "qwen2";
  q2["architectures"] = {"Qwen2ForCausalLM"};
  q2.erase("attention_bias");
  const ModelConfig c2 = model_config_from_hf(q2, "config.json");
  EXPECT_EQ(c2.family, "qwen2");
  EXPECT_EQ(llama_keys(c2).head_dim, 0);
  // Each family's export reads back to the same model.
  for (const ModelConfig& m : {c, c2}) {
    SCOPED_TRACE(m.family);
    const auto written = model_family(m.family).hf_config(m, DType::bf16);
    EXPECT_EQ(written["model_type"], m.family);
    const ModelConfig back = model_config_from_hf(nlohmann::json::parse(written.dump()), "back");
    EXPECT_EQ(back.family, m.family);
    EXPECT_EQ(back.own, m.own);
    EXPECT_EQ(back.n_embd, m.n_embd);
  }
  // The model each builds: Qwen2's biases, Qwen3's q/k norms, by Hugging Face's names.
  auto has = [](const ModelConfig& m, const std::string& name) {
    const auto model = model_family(m.family).build(m, DType::f32);
    for (const ParamSpec& s : model->param_specs())
      if (s.name == name) return true;
    return false;
  };
  q3.erase("attention_bias");
  const ModelConfig c3 = model_config_from_hf(q3, "config.json");
  EXPECT_TRUE(has(c2, "model.layers.0.self_attn.q_proj.bias"));
  EXPECT_FALSE(has(c2, "model.layers.0.self_attn.q_norm.weight"));
  EXPECT_TRUE(has(c3, "model.layers.0.self_attn.k_norm.weight"));
  EXPECT_FALSE(has(c3, "model.layers.0.self_attn.q_proj.bias"));
}

TEST(ModelFamily, ReadsHuggingFaceGpt2Config) {
  const nlohmann::json j = {{"model_type", "gpt2"}, {"n_layer", 3},      {"n_embd", 48},
                            {"n_head", 4},          {"n_positions", 64}, {"vocab_size", 50257}};
  const ModelConfig c = model_config_from_hf(j, "config.json");
  EXPECT_EQ(c.family, "gpt2");
  EXPECT_EQ(c.n_layer, 3);
  EXPECT_EQ(c.block_size, 64);
  EXPECT_EQ(c.padded_vocab(), 50304);
}

// A checkpoint's meta.model names the family and every key that shapes the model; reading it
// back gives the model the run had, and a manifest older than families is GPT-2's.
TEST(ModelFamily, CheckpointRecordRoundTrips) {
  const Config config = load_config(
      "llama-tiny", {"model.n_kv_head=1", "model.rope_theta=5e5", "model.tie_embeddings=false"});
  const auto model = make_model(config);
  const nlohmann::json meta = model_meta_json(config.model, *model);
  EXPECT_EQ(meta["family"], "llama");
  const ModelConfig back = model_config_from_json(meta, "meta.model");
  EXPECT_EQ(back.family, "llama");
  const LlamaKeys own = llama_keys(back);
  EXPECT_EQ(own.n_kv_head, 1);
  EXPECT_EQ(own.ffn_hidden, 768);
  EXPECT_EQ(own.rope_theta, 5e5);
  EXPECT_FALSE(own.tie_embeddings);
  EXPECT_EQ(model_family(back.family).build(back, DType::f32)->describe(), model->describe());
  nlohmann::json old =
      model_meta_json(load_config("tiny", {}).model, *make_model(load_config("tiny", {})));
  old.erase("family");
  EXPECT_EQ(model_config_from_json(old, "meta.model").family, "gpt2");
}

}  // namespace
}  // namespace st
