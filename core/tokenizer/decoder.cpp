#include "core/tokenizer/decoder.hpp"

#include <cctype>
#include <memory>

#include "core/error.hpp"
#include "core/json_parse.hpp"
#include "core/tokenizer/json_fields.hpp"
#include "core/tokenizer/pattern.hpp"
#include "core/tokenizer/unicode.hpp"

namespace st {
namespace {

using namespace tokenizer_json;
using Tokens = std::vector<std::string>;

// Every character a byte of the byte-level alphabet: those bytes; else the token as it is.
Tokens byte_level(Tokens tokens) {
  std::string bytes;
  for (const std::string& token : tokens) {
    std::string mapped;
    bool all = true;
    for (size_t at = 0; all && at < token.size();) {
      const int b = unicode::byte_of_level_code_point(unicode::next_code_point(token, at));
      all = b >= 0;
      mapped += char(b);
    }
    bytes += all ? mapped : token;
  }
  return {unicode::utf8_lossy(bytes)};
}

// Runs of <0xNN> tokens become their bytes (U+FFFD per byte when they are not UTF-8).
Tokens byte_fallback(Tokens tokens) {
  Tokens out;
  std::string bytes;
  size_t count = 0;
  const auto flush = [&] {
    if (count == 0) return;
    if (unicode::first_invalid_utf8(bytes) == bytes.size()) {
      out.push_back(bytes);
    } else {
      for (size_t i = 0; i < count; ++i) out.push_back("\xEF\xBF\xBD");
    }
    bytes.clear();
    count = 0;
  };
  for (std::string& token : tokens) {
    const auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
    if (token.size() == 6 && token.compare(0, 3, "<0x") == 0 && token[5] == '>' && hex(token[3]) &&
        hex(token[4])) {
      bytes += char(std::stoi(token.substr(3, 2), nullptr, 16));
      ++count;
    } else {
      flush();
      out.push_back(std::move(token));
    }
  }
  flush();
  return out;
}

// Up to `start` leading and `stop` trailing `content` characters off each token.
Tokens strip_each(Tokens tokens, const std::string& content, int64_t start, int64_t stop) {
  for (std::string& token : tokens) {
    for (int64_t i = 0; i < start && token.compare(0, content.size(), content) == 0; ++i)
      token.erase(0, content.size());
    for (int64_t i = 0; i < stop && token.size() >= content.size() &&
                        token.compare(token.size() - content.size(), content.size(), content) == 0;
         ++i)
      token.resize(token.size() - content.size());
  }
  return tokens;
}

DecodeChain metaspace(const Json& j, const std::string& where) {
  const std::string replacement = string_or(j, "replacement", where, "\xE2\x96\x81");
  bool strip_first = bool_or(j, "add_prefix_space", where, true);
  if (find(j, "prepend_scheme")) strip_first = string_at(j, "prepend_scheme", where) != "never";
  bool_or(j, "split", where, true);
  auto shared = std::make_shared<Pattern>(Pattern::literal(replacement));
  return [shared, strip_first](Tokens tokens) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = replace_all(*shared, tokens[i], " ");
      if (i == 0 && strip_first && !tokens[i].empty() && tokens[i][0] == ' ') tokens[i].erase(0, 1);
    }
    return tokens;
  };
}

}  // namespace

DecodeChain make_decoder(const Json& j, const std::string& where) {
  if (j.is_null()) return {};
  const std::string type = type_of(j, where);
  if (type == "ByteLevel") return byte_level;
  if (type == "ByteFallback") return byte_fallback;
  if (type == "Fuse") {
    return [](Tokens tokens) {
      std::string all;
      for (const std::string& t : tokens) all += t;
      return Tokens{all};
    };
  }
  if (type == "Strip") {
    const std::string content = string_at(j, "content", where);
    const int64_t start = json_int_at(j, "start", where + ".start", 0, INT32_MAX);
    const int64_t stop = json_int_at(j, "stop", where + ".stop", 0, INT32_MAX);
    return
        [content, start, stop](Tokens t) { return strip_each(std::move(t), content, start, stop); };
  }
  if (type == "Replace") {
    auto pattern = std::make_shared<Pattern>(read_pattern(j, where));
    const std::string content = string_at(j, "content", where);
    return [pattern, content](Tokens tokens) {
      for (std::string& t : tokens) t = replace_all(*pattern, t, content);
      return tokens;
    };
  }
  if (type == "Metaspace") return metaspace(j, where);
  if (type == "Sequence") {
    const Json* list = find(j, "decoders");
    if (!list || !list->is_array()) fail_input("{}.decoders must be an array", where);
    std::vector<DecodeChain> steps;
    for (size_t i = 0; i < list->size(); ++i) {
      DecodeChain step = make_decoder((*list)[i], fmt::format("{}.decoders[{}]", where, i));
      if (step) steps.push_back(std::move(step));
    }
    return [steps](Tokens tokens) {
      for (const DecodeChain& step : steps) tokens = step(std::move(tokens));
      return tokens;
    };
  }
  unsupported(where, type, "ByteLevel, ByteFallback, Metaspace, Fuse, Strip, Replace, Sequence");
}

}  // namespace st
