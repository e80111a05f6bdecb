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

std::vector<std::string> text_sections(std::string_view text) {
  std::vector<std::string> sections;
  size_t begin = 0;
  while (true) {
    const size_t end = text.find("\n\n", begin);
    sections.push_back(
        std::string(text.substr(begin, end == std::string_view::npos ? end : end - begin)) +
        "\n\n");
    if (end == std::string_view::npos) return sections;
    begin = end + 2;
  }
}

}  // namespace st
