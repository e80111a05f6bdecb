#pragma once
// Model families. A family is one folder, models/NAME/: its model code (a Model, usually a
// DecoderModel), its own [model] keys as its own struct (own_keys.hpp), and its registration
// (family.cpp: checks, builder, checkpoint record, Hugging Face config.json both ways), listed
// once in models/family.cpp, as torchtitan's ModelSpec. Everything else reaches a family only
// through this registry.
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "core/data/tokenizer.hpp"
#include "core/dtype.hpp"
#include "core/json_parse.hpp"
#include "core/model/model.hpp"
#include "core/model/param_slice.hpp"

namespace st {

// A value of a key only one family reads.
using OwnValue = std::variant<int64_t, double, bool>;

// The [model] section: the family and the keys every family reads. A family's own keys are kept
// by name as they were set, and the family reads them into its own struct (own_keys.hpp), its
// defaults filling the rest; a key of another family among them is refused.
struct ModelConfig {
  std::string family = "gpt2";
  int64_t n_layer = 4;
  int64_t n_embd = 256;
  int64_t n_head = 4;
  int64_t block_size = 256;
  int64_t vocab_size = kByteVocabSize;
  int64_t padded_vocab_size = 0;  // 0: vocab_size rounded up to a multiple of 128
  // The family keys that were set ("model.n_kv_head" → 2), by a config, an override, a
  // checkpoint or a config.json.
  std::map<std::string, OwnValue> own;

  int64_t padded_vocab() const { return st::padded_vocab(vocab_size, padded_vocab_size); }
};

// A [model] key of a family (not every family reads it), as the config reference documents it.
struct OwnKey {
  std::string key;  // "model.n_kv_head"
  OwnValue default_value;
  std::string allowed;
  std::string meaning;
};

struct ModelFamily {
  const char* name;          // model.family
  const char* display_name;  // in tables ("GPT", "llama")
  const char* description;
  // The model.* keys this family reads beyond the common ones (every family's).
  std::vector<OwnKey> own_keys;
  // The family's own checks of a shape (the common keys' ranges and n_embd % n_head are
  // checked before); InputErrors naming the key.
  void (*validate)(const ModelConfig&);
  // Parameter specs only, computing in `dtype`.
  std::unique_ptr<Model> (*build)(const ModelConfig&, DType dtype);
  // Tensor parallelism (nullptr while the family has no plan for it): the checks of a split
  // over `tp` ranks (InputErrors naming the keys and numbers), and the model of TP rank
  // slice.rank's slices (parameter specs only).
  void (*check_tensor_parallel)(const ModelConfig&, int64_t tp);
  std::unique_ptr<Model> (*build_slice)(const ModelConfig&, DType dtype, TpSlice slice);
  // What a checkpoint records beyond Model::hyperparameters(), and reads back.
  void (*to_meta)(const ModelConfig&, nlohmann::json& model);
  void (*from_meta)(const nlohmann::json& model, ModelConfig&, const std::string& where);
  // Hugging Face's config.json for an export, and the shape read from one.
  const char* hf_model_type;
  nlohmann::ordered_json (*hf_config)(const ModelConfig&, DType dtype);
  ModelConfig (*from_hf_config)(const nlohmann::json&, const std::string& where);

  bool owns(const std::string& key) const;
  // The value of own key `key` in effect for `config` (the default when it was not set).
  OwnValue own_value(const ModelConfig& config, const std::string& key) const;
};

// Every registered family, and the one named `name` (an InputError listing them otherwise).
const std::vector<const ModelFamily*>& model_families();
const ModelFamily& model_family(const std::string& name);
// The family whose config.json has this `model_type` (GPT-2's when absent).
const ModelFamily& model_family_for_hf(const nlohmann::json& config, const std::string& where);

// The families that read key `key` (families built on one block share its keys: llama, qwen2
// and qwen3 read model.n_kv_head); none: a key every family reads, or none.
std::vector<const ModelFamily*> model_families_owning(const std::string& key);
// An InputError unless `tp` divides `value` (key `key`, which TP splits as `what`), naming the
// tp values that would.
void check_tp_divides(int64_t tp, const char* key, int64_t value, const char* what);

// "llama, qwen2 or qwen3", for messages.
std::string family_names(const std::vector<const ModelFamily*>& families);

}  // namespace st
