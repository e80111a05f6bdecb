#pragma once
// The config keys' schema, inside launch/'s config code (config.hpp is the interface): each
// key's kind, how it sets and shows its field, and what the reference documents for it.
#include <functional>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "launch/config.hpp"

namespace st {

using Value = std::variant<int64_t, double, std::string, bool>;
enum class Kind { integer, number, string, boolean, boolean_or_integer };

struct KeySpec {
  Kind kind;
  std::function<void(Config&, const Value&, const std::string& key)> set;
  std::function<std::string(const Config&)> show;
};

// A key as the reference documents it (`shardtrain config --list`, docs/config.md): the
// values validate_config accepts and a one-line meaning.
struct KeyEntry {
  KeySpec spec;
  const char* allowed;
  const char* meaning;
};

const char* kind_name(Kind k);
// Every key, by name (config_schema.cpp).
const std::map<std::string, KeyEntry>& registry();
// The key's spec, or an InputError naming `where` and the closest key.
const KeySpec& find_key(const std::string& key, const std::string& where);
// Keys renamed, old name -> new: still read, as the new key, with a note (Config::renamed_keys).
const std::vector<std::pair<std::string, std::string>>& renamed_keys();
// Sets `key` (or the key it was renamed to) from `value(kind, key)`; returns the key's spec.
const KeySpec& set_key(Config& config, const std::string& key, const std::string& where,
                       const std::function<Value(Kind, const std::string&)>& value);

}  // namespace st
