#include "core/tokenizer/json_fields.hpp"

#include "core/error.hpp"

namespace st::tokenizer_json {

const Json* find(const Json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::string string_at(const Json& j, const char* key, const std::string& where) {
  const Json* value = find(j, key);
  if (!value || !value->is_string())
    fail_input("{}.{} must be a string, got {}", where, key, value ? value->dump() : "nothing");
  return value->get<std::string>();
}

std::string string_or(const Json& j, const char* key, const std::string& where,
                      const std::string& otherwise) {
  return find(j, key) ? string_at(j, key, where) : otherwise;
}

bool bool_or(const Json& j, const char* key, const std::string& where, bool otherwise) {
  const Json* value = find(j, key);
  if (!value) return otherwise;
  if (!value->is_boolean())
    fail_input("{}.{} must be true or false, got {}", where, key, value->dump());
  return value->get<bool>();
}

std::string type_of(const Json& j, const std::string& where) {
  if (!j.is_object()) fail_input("{} must be an object, got {}", where, j.dump().substr(0, 80));
  return string_at(j, "type", where);
}

void unsupported(const std::string& where, const std::string& type, const char* supported) {
  fail_input("{} type '{}' is not supported (shardtrain reads {})", where, type, supported);
}

void require_default(const Json& j, const char* key, const std::string& where, const Json& value) {
  const Json* given = find(j, key);
  if (given && *given != value)
    fail_input("{}.{} = {} is not supported (only {})", where, key, given->dump(), value.dump());
}

}  // namespace st::tokenizer_json
