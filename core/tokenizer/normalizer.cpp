#include "core/tokenizer/normalizer.hpp"

#include <memory>
#include <vector>

#include "core/error.hpp"
#include "core/tokenizer/json_fields.hpp"
#include "core/tokenizer/pattern.hpp"
#include "core/tokenizer/unicode.hpp"

namespace st {

using namespace tokenizer_json;

namespace {

std::string strip(const std::string& text, bool left, bool right) {
  size_t begin = 0, end = text.size();
  if (left) {
    while (begin < end) {
      size_t next = begin;
      if (!unicode::is_whitespace(unicode::next_code_point(text, next))) break;
      begin = next;
    }
  }
  if (right) {
    while (end > begin) {
      size_t start = end - 1;  // back to the last character's lead byte
      while (start > begin && (static_cast<unsigned char>(text[start]) & 0xc0) == 0x80) --start;
      size_t next = start;
      if (!unicode::is_whitespace(unicode::next_code_point(text, next))) break;
      end = start;
    }
  }
  return text.substr(begin, end - begin);
}

}  // namespace

Normalize make_normalizer(const nlohmann::json& j, const std::string& where) {
  if (j.is_null()) return {};
  const std::string type = type_of(j, where);
  using unicode::Form;
  const auto form = [](Form f) {
    return [f](std::string text) { return unicode::normalize(text, f); };
  };
  if (type == "NFC") return form(Form::nfc);
  if (type == "NFD") return form(Form::nfd);
  if (type == "NFKC") return form(Form::nfkc);
  if (type == "NFKD") return form(Form::nfkd);
  if (type == "Lowercase") return [](std::string text) { return unicode::lowercase(text); };
  if (type == "Prepend") {
    const std::string prefix = string_at(j, "prepend", where);
    return [prefix](std::string text) { return text.empty() ? text : prefix + text; };
  }
  if (type == "Replace") {
    auto pattern = std::make_shared<Pattern>(read_pattern(j, where));
    const std::string content = string_at(j, "content", where);
    return [pattern, content](std::string text) { return replace_all(*pattern, text, content); };
  }
  if (type == "Strip") {
    const bool left = bool_or(j, "strip_left", where, false);
    const bool right = bool_or(j, "strip_right", where, false);
    return [left, right](std::string text) { return strip(text, left, right); };
  }
  if (type == "Sequence") {
    const Json* list = find(j, "normalizers");
    if (!list || !list->is_array()) fail_input("{}.normalizers must be an array", where);
    std::vector<Normalize> steps;
    for (size_t i = 0; i < list->size(); ++i) {
      Normalize step = make_normalizer((*list)[i], fmt::format("{}.normalizers[{}]", where, i));
      if (step) steps.push_back(std::move(step));
    }
    return [steps](std::string text) {
      for (const Normalize& step : steps) text = step(std::move(text));
      return text;
    };
  }
  unsupported(where, type, "NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace, Strip, Sequence");
}

}  // namespace st
