#include "core/data/tokenizer.hpp"

namespace st {

std::vector<int32_t> encode_bytes(std::string_view text) {
  std::vector<int32_t> tokens(text.size());
  for (size_t i = 0; i < text.size(); ++i) tokens[i] = int32_t(static_cast<unsigned char>(text[i]));
  return tokens;
}

std::string decode_bytes(const int32_t* tokens, size_t n) {
  std::string text(n, '\0');
  for (size_t i = 0; i < n; ++i) text[i] = char(tokens[i] & 0xff);
  return text;
}

}  // namespace st
