#pragma once
// Model families: everything outside a family's model code that knows the family — its
// [model] keys and their checks, its builder, its checkpoint record and its Hugging Face
// config.json in both directions — reached through one registration
// (launch/families/NAME.cpp, listed once in model_family.cpp), as torchtitan's ModelSpec.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "core/data/tokenizer.hpp"
#include "core/dtype.hpp"
#include "core/json_parse.hpp"
#include "core/model/model.hpp"

namespace st {

// The [model] section: the family, the keys every family reads, then those of one family
// (a key another family reads is refused: model_keys_given says which were written).
struct ModelConfig {
  std::string family = "gpt2";
  int64_t n_layer = 4;
  int64_t n_embd = 256;
  int64_t n_head = 4;
  int64_t block_size = 256;
  int64_t vocab_size = kByteVocabSize;
  int64_t padded_vocab_size = 0;  // 0: vocab_size rounded up to a multiple of 128
  // Llama's.
  int64_t n_kv_head = 0;   // 0: n_head
  int64_t ffn_hidden = 0;  // 0: 8·n_embd/3 rounded up to a multiple of 256
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
  bool tie_embeddings = true;
  // The model.* keys a config file or an override wrote (not the defaults).
  std::vector<std::string> model_keys_given;

  int64_t padded_vocab() const { return st::padded_vocab(vocab_size, padded_vocab_size); }
};

// A [model] key only one family reads: its field, and what the config reference says of it.
struct FamilyKey {
  const char* key;  // "model.n_kv_head"
  std::variant<int64_t ModelConfig::*, double ModelConfig::*, bool ModelConfig::*> field;
  const char* allowed;
  const char* meaning;
};

struct ModelFamily {
  const char* name;  // model.family
  const char* description;
  // The model.* keys only this family reads (the common ones are every family's).
  std::vector<FamilyKey> own_keys;
  bool owns(const std::string& key) const;
  // The family's own checks of a shape (the common keys' ranges and n_embd % n_head are
  // checked before); InputErrors naming the key.
  void (*validate)(const ModelConfig&);
  // Parameter specs only, computing in `dtype`.
  std::unique_ptr<Model> (*build)(const ModelConfig&, DType dtype);
  // What a checkpoint records beyond Model::hyperparameters(), and reads back.
  void (*to_meta)(const ModelConfig&, nlohmann::json& model);
  void (*from_meta)(const nlohmann::json& model, ModelConfig&, const std::string& where);
  // Hugging Face's config.json for an export, and the shape read from one.
  const char* hf_model_type;
  nlohmann::ordered_json (*hf_config)(const ModelConfig&, DType dtype);
  ModelConfig (*from_hf_config)(const nlohmann::json&, const std::string& where);
};

// Every registered family, and the one named `name` (an InputError listing them otherwise).
const std::vector<const ModelFamily*>& model_families();
const ModelFamily& model_family(const std::string& name);
// The family whose config.json has this `model_type` (GPT-2's when absent).
const ModelFamily& model_family_for_hf(const nlohmann::json& config, const std::string& where);

// The family whose own key `key` is (null: a key every family reads, or none).
const ModelFamily* model_family_owning(const std::string& key);

}  // namespace st
