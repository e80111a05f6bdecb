#pragma once
// tokenizer.json's "normalizer": NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace, Strip and
// Sequence of them. Anything else is refused by name.
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace st {

using Normalize = std::function<std::string(std::string)>;

// An empty function for null (no normalizer). `where` names the object in messages.
Normalize make_normalizer(const nlohmann::json& j, const std::string& where);

}  // namespace st
