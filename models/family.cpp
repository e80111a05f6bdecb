#include "models/family.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"

namespace st {

const ModelFamily& gpt2_family();   // models/gpt2/family.cpp
const ModelFamily& llama_family();  // models/llama/family.cpp
const ModelFamily& qwen2_family();  // models/qwen/family.cpp
const ModelFamily& qwen3_family();  // models/qwen/family.cpp

const std::vector<const ModelFamily*>& model_families() {
  // The one line a new family adds.
  static const std::vector<const ModelFamily*> families = {&gpt2_family(), &llama_family(),
                                                           &qwen2_family(), &qwen3_family()};
  return families;
}

bool ModelFamily::owns(const std::string& key) const {
  for (const OwnKey& k : own_keys)
    if (key == k.key) return true;
  return false;
}

OwnValue ModelFamily::own_value(const ModelConfig& config, const std::string& key) const {
  if (const auto it = config.own.find(key); it != config.own.end()) return it->second;
  for (const OwnKey& k : own_keys)
    if (key == k.key) return k.default_value;
  fail("{} is not a key of model.family = {}", key, name);
}

std::vector<const ModelFamily*> model_families_owning(const std::string& key) {
  std::vector<const ModelFamily*> owners;
  for (const ModelFamily* f : model_families())
    if (f->owns(key)) owners.push_back(f);
  return owners;
}

std::string family_names(const std::vector<const ModelFamily*>& families) {
  std::string names;
  for (size_t i = 0; i < families.size(); ++i)
    names += (i == 0                     ? ""
              : i + 1 == families.size() ? " or "
                                         : ", ") +
             std::string(families[i]->name);
  return names;
}

void check_tp_divides(int64_t tp, const char* key, int64_t value, const char* what) {
  if (value % tp == 0) return;
  std::vector<int64_t> fits;
  for (int64_t d = 1; d <= value && fits.size() < 8; ++d)
    if (value % d == 0) fits.push_back(d);
  fail_input(
      "parallel.tp = {} does not divide {} = {}: tensor parallelism splits {} evenly over "
      "the TP ranks (tp = {}{} would)",
      tp, key, value, what, fmt::join(fits, ", "), fits.size() == 8 ? ", ..." : "");
}

const ModelFamily& model_family(const std::string& name) {
  std::vector<std::string> names;
  for (const ModelFamily* f : model_families()) {
    if (name == f->name) return *f;
    names.push_back(f->name);
  }
  fail_input("model.family = '{}' is not a model family ({})", name, fmt::join(names, ", "));
}

const ModelFamily& model_family_for_hf(const nlohmann::json& config, const std::string& where) {
  std::vector<std::string> types;
  for (const ModelFamily* f : model_families()) types.push_back(f->hf_model_type);
  if (!config.contains("model_type"))
    fail_input(
        "{} has no model_type: which architecture it describes is unknown (shardtrain reads "
        "{})",
        where, fmt::join(types, ", "));
  const nlohmann::json& type = config["model_type"];
  for (const ModelFamily* f : model_families())
    if (type.is_string() && type.get<std::string>() == f->hf_model_type) return *f;
  fail_input("{}: model_type = {} is not one shardtrain reads ({})", where, type.dump(),
             fmt::join(types, ", "));
}

}  // namespace st
