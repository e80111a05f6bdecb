#include "core/tokenizer/post_processor.hpp"

#include "core/error.hpp"
#include "core/json_parse.hpp"
#include "core/tokenizer/json_fields.hpp"

namespace st {
namespace {

using namespace tokenizer_json;

void template_tokens(const Json& j, const std::string& where, SectionTokens& out) {
  const Json* single = find(j, "single");
  const Json* specials = find(j, "special_tokens");
  if (!single || !single->is_array()) fail_input("{}.single must be an array", where);
  bool after = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const std::string at = fmt::format("{}.single[{}]", where, i);
    const Json& item = (*single)[i];
    if (find(item, "Sequence")) {
      after = true;
      continue;
    }
    const Json* special = find(item, "SpecialToken");
    if (!special) fail_input("{} must be {{\"SpecialToken\": ...}} or {{\"Sequence\": ...}}", at);
    const std::string name = string_at(*special, "id", at + ".SpecialToken");
    const Json* entry = specials ? find(*specials, name.c_str()) : nullptr;
    if (!entry) fail_input("{}: special token '{}' is not in {}.special_tokens", at, name, where);
    for (int64_t id :
         json_int_array(entry->contains("ids") ? (*entry)["ids"] : Json(),
                        fmt::format("{}.special_tokens['{}'].ids", where, name), 0, INT32_MAX - 1))
      (after ? out.suffix : out.prefix).push_back(int32_t(id));
  }
}

void processor_tokens(const Json& j, const std::string& where, SectionTokens& out) {
  if (j.is_null()) return;
  const std::string type = type_of(j, where);
  if (type == "ByteLevel") return;  // offsets only
  if (type == "TemplateProcessing") return template_tokens(j, where, out);
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    for (const char* key : {"cls", "sep"}) {
      const Json* pair = find(j, key);
      if (!pair || !pair->is_array() || pair->size() != 2)
        fail_input("{}.{} must be [token, id]", where, key);
      const int64_t id =
          json_int((*pair)[1], fmt::format("{}.{}[1]", where, key), 0, INT32_MAX - 1);
      (std::string(key) == "cls" ? out.prefix : out.suffix).push_back(int32_t(id));
    }
    return;
  }
  if (type == "Sequence") {
    const Json* list = find(j, "processors");
    if (!list || !list->is_array()) fail_input("{}.processors must be an array", where);
    for (size_t i = 0; i < list->size(); ++i)
      processor_tokens((*list)[i], fmt::format("{}.processors[{}]", where, i), out);
    return;
  }
  unsupported(where, type,
              "ByteLevel, TemplateProcessing, RobertaProcessing, BertProcessing, Sequence");
}

// tokenizer_config.json's bos_token/eos_token: a string, {"content": ...} or null.
std::optional<std::string> config_token(const Json& config, const char* key,
                                        const std::string& path) {
  const Json* value = find(config, key);
  if (!value) return std::nullopt;
  if (value->is_string()) return value->get<std::string>();
  if (value->is_object()) return string_at(*value, "content", fmt::format("'{}': {}", path, key));
  fail_input("'{}': {} must be a string or {{\"content\": ...}}, got {}", path, key,
             value->dump().substr(0, 80));
}

}  // namespace

SectionTokens section_tokens(const Json& post_processor, const std::string& where,
                             const Json& config, const std::string& config_path,
                             const TokenIdOf& id_of) {
  SectionTokens out;
  processor_tokens(post_processor, where, out);
  if (!out.prefix.empty() || !out.suffix.empty()) return out;
  const std::string config_where = fmt::format("'{}'", config_path);
  const auto lookup = [&](const char* key) -> std::optional<int32_t> {
    const auto token = config_token(config, key, config_path);
    if (!token) return std::nullopt;
    const auto id = id_of(*token);
    if (!id) fail_input("'{}': {} '{}' is not a token of the tokenizer", config_path, key, *token);
    return id;
  };
  if (bool_or(config, "add_bos_token", config_where, true))
    if (const auto bos = lookup("bos_token")) out.prefix.push_back(*bos);
  if (bool_or(config, "add_eos_token", config_where, false))
    if (const auto eos = lookup("eos_token")) out.suffix.push_back(*eos);
  if (out.prefix.empty() && out.suffix.empty())
    if (const auto eot = id_of("<|endoftext|>")) out.prefix.push_back(*eot);
  return out;
}

}  // namespace st
