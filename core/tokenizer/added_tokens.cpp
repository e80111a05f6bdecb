#include "core/tokenizer/added_tokens.hpp"

#include <algorithm>
#include <climits>

#include "core/error.hpp"
#include "core/tokenizer/json_fields.hpp"
#include "core/tokenizer/unicode.hpp"

namespace st {

using namespace tokenizer_json;

std::vector<AddedToken> read_added_tokens(const Json& j, const std::string& where) {
  std::vector<AddedToken> tokens;
  if (j.is_null()) return tokens;
  if (!j.is_array()) fail_input("{} must be an array", where);
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string at = fmt::format("{}[{}]", where, i);
    const Json& t = j[i];
    if (!t.is_object()) fail_input("{} must be an object", at);
    AddedToken token;
    const Json* id = find(t, "id");
    if (!id || !id->is_number_integer() || id->get<int64_t>() < 0 ||
        id->get<int64_t>() >= INT32_MAX)
      fail_input("{}.id must be an id 0..{}, got {}", at, INT32_MAX - 1,
                 id ? id->dump() : "nothing");
    token.id = int32_t(id->get<int64_t>());
    token.content = string_at(t, "content", at);
    if (token.content.empty()) fail_input("{}.content is empty", at);
    if (unicode::first_invalid_utf8(token.content) != token.content.size())
      fail_input("{}.content is not valid UTF-8", at);
    token.single_word = bool_or(t, "single_word", at, false);
    token.lstrip = bool_or(t, "lstrip", at, false);
    token.rstrip = bool_or(t, "rstrip", at, false);
    token.normalized = bool_or(t, "normalized", at, false);
    token.special = bool_or(t, "special", at, false);
    tokens.push_back(std::move(token));
  }
  return tokens;
}

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  std::stable_sort(tokens_.begin(), tokens_.end(), [](const AddedToken& a, const AddedToken& b) {
    return a.content.size() > b.content.size();
  });
  for (const AddedToken& t : tokens_) first_byte_[static_cast<unsigned char>(t.content[0])] = true;
}

namespace {

// The code point that ends text[..end] (end > 0).
char32_t last_code_point(std::string_view text, size_t end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xc0) == 0x80) --start;
  return unicode::next_code_point(text, start);
}

bool is_word_char(char32_t cp) {
  return unicode::is_alphanumeric(cp) || cp == '_';
}

}  // namespace

std::vector<Segment> AddedTokenMatcher::split(std::string_view text) const {
  std::vector<Segment> out;
  size_t plain = 0;  // where the text not yet emitted begins
  for (size_t at = 0; at < text.size();) {
    const AddedToken* found = nullptr;
    if (first_byte_[static_cast<unsigned char>(text[at])])
      for (const AddedToken& t : tokens_)
        if (text.compare(at, t.content.size(), t.content) == 0) {
          found = &t;
          break;
        }
    if (!found) {
      ++at;
      continue;
    }
    size_t begin = at, end = at + found->content.size();
    at = end;
    if (found->single_word) {
      size_t after = end;
      const bool word_before = begin > 0 && is_word_char(last_code_point(text, begin));
      const bool word_after =
          end < text.size() && is_word_char(unicode::next_code_point(text, after));
      if (word_before || word_after) continue;
    }
    if (found->lstrip)
      while (begin > plain && unicode::is_whitespace(last_code_point(text, begin))) {
        --begin;
        while ((static_cast<unsigned char>(text[begin]) & 0xc0) == 0x80) --begin;
      }
    if (found->rstrip)
      while (end < text.size()) {
        size_t next = end;
        if (!unicode::is_whitespace(unicode::next_code_point(text, next))) break;
        end = next;
      }
    if (begin > plain) out.push_back({text.substr(plain, begin - plain), -1});
    out.push_back({text.substr(begin, end - begin), found->id});
    plain = at = end;
  }
  if (plain < text.size()) out.push_back({text.substr(plain), -1});
  return out;
}

}  // namespace st
