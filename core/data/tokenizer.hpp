#pragma once
// Byte-level tokenizer: every byte is a token (vocabulary 256), so any text round-trips.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace st {

constexpr int64_t kByteVocabSize = 256;

std::vector<int32_t> encode_bytes(std::string_view text);
std::string decode_bytes(const int32_t* tokens, size_t n);

}  // namespace st
