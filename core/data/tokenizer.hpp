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

// The sections `tokenize --sections` encodes apart: the text cut at "\n\n" (as JavaScript's
// String.split cuts, empty pieces kept), each piece with "\n\n" appended.
std::vector<std::string> text_sections(std::string_view text);

}  // namespace st
