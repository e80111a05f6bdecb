#pragma once
// Reading tokenizer.json's objects: members by name with their types checked, every message
// starting with the place in the file ("'dir/tokenizer.json': pre_tokenizer.pretokenizers[1]").
#include <nlohmann/json.hpp>
#include <string>

namespace st::tokenizer_json {

using Json = nlohmann::json;

// j[key] when present and not null, else nullptr.
const Json* find(const Json& j, const char* key);
std::string string_at(const Json& j, const char* key, const std::string& where);
std::string string_or(const Json& j, const char* key, const std::string& where,
                      const std::string& otherwise);
bool bool_or(const Json& j, const char* key, const std::string& where, bool otherwise);
// The "type" of a component object.
std::string type_of(const Json& j, const std::string& where);
// A component of a kind this reader does not implement: refused by name, never approximated.
[[noreturn]] void unsupported(const std::string& where, const std::string& type,
                              const char* supported);
// A member that must be absent, null or the given value (a setting with no effect here).
void require_default(const Json& j, const char* key, const std::string& where, const Json& value);

}  // namespace st::tokenizer_json
