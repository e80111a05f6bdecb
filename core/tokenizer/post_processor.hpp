#pragma once
// What goes around each section of `tokenize --sections`: the special tokens of tokenizer.json's
// "post_processor" (TemplateProcessing's single template, RobertaProcessing/BertProcessing's cls
// and sep, Sequence of those and ByteLevel), else tokenizer_config.json's bos_token (unless
// add_bos_token is false) and eos_token (when add_eos_token), else <|endoftext|>.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace st {

struct SectionTokens {
  std::vector<int32_t> prefix, suffix;
};

using TokenIdOf = std::function<std::optional<int32_t>(const std::string& token)>;

SectionTokens section_tokens(const nlohmann::json& post_processor, const std::string& where,
                             const nlohmann::json& config, const std::string& config_path,
                             const TokenIdOf& id_of);

}  // namespace st
