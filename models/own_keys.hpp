#pragma once
// A family's own [model] keys as its own struct: `Own` holds the fields with their defaults,
// OwnKeys<Own> lists which key sets which field, and moves values between the struct and
// ModelConfig::own (where a config file, a checkpoint or a config.json put them).
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "models/family.hpp"

namespace st {

template <class Own>
struct OwnField {
  const char* key;  // "model.n_kv_head"
  std::variant<int64_t Own::*, double Own::*, bool Own::*> field;
  const char* allowed;
  const char* meaning;
};

template <class Own>
class OwnKeys {
 public:
  explicit OwnKeys(std::vector<OwnField<Own>> fields) : fields_(std::move(fields)) {}

  // The keys as the registry documents them, with Own's defaults.
  std::vector<OwnKey> describe() const {
    std::vector<OwnKey> keys;
    const Own defaults{};
    for (const OwnField<Own>& f : fields_)
      keys.push_back({f.key, std::visit([&](auto p) { return OwnValue(defaults.*p); }, f.field),
                      f.allowed, f.meaning});
    return keys;
  }

  // Own's defaults with the keys `config` sets (each stored as its field's type).
  Own read(const ModelConfig& config) const {
    Own own{};
    for (const OwnField<Own>& f : fields_)
      if (const auto it = config.own.find(f.key); it != config.own.end())
        std::visit(
            [&](auto p) {
              using T = std::remove_cvref_t<decltype(own.*p)>;
              own.*p = std::get<T>(it->second);
            },
            f.field);
    return own;
  }

  // Every field of `own` into `config` (a shape read from a checkpoint or a config.json).
  void write(const Own& own, ModelConfig& config) const {
    for (const OwnField<Own>& f : fields_)
      std::visit([&](auto p) { config.own[f.key] = OwnValue(own.*p); }, f.field);
  }

 private:
  std::vector<OwnField<Own>> fields_;
};

}  // namespace st
