#pragma once
// tokenizer.json's "decoder": token strings back to text. ByteLevel, ByteFallback, Metaspace,
// Fuse, Strip, Replace and Sequence, each mapping the list of token strings as Hugging Face's
// decode_chain does; anything else is refused by name.
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace st {

using DecodeChain = std::function<std::vector<std::string>(std::vector<std::string>)>;

// An empty function for null (tokens are then joined with spaces, as Hugging Face does).
DecodeChain make_decoder(const nlohmann::json& j, const std::string& where);

}  // namespace st
