#include "core/tokenizer/pattern.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.hpp"
#include "core/tokenizer/json_fields.hpp"
#include "core/tokenizer/unicode.hpp"

namespace st {
namespace {

// Oniguruma's \s with Unicode: U+0009-000D, NEL and the separators (Zs, Zl, Zp).
constexpr const char* kSpaceSet =
    R"(\x{9}-\x{d}\x{20}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000})";
constexpr const char* kWordSet = R"(\p{L}\p{M}\p{Nd}\p{Pc})";
constexpr const char* kHexSet = "0-9a-fA-F";

}  // namespace

std::string oniguruma_to_pcre2(std::string_view pattern, const std::string& where) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      const char* set = e == 's' || e == 'S'   ? kSpaceSet
                        : e == 'w' || e == 'W' ? kWordSet
                        : e == 'h' || e == 'H' ? kHexSet
                                               : nullptr;
      const bool negated = e == 'S' || e == 'W' || e == 'H';
      if (!set) {
        out += c;
        out += e;
      } else if (!in_class) {
        out += negated ? "[^" : "[";
        out += set;
        out += ']';
      } else if (!negated) {
        out += set;
      } else {
        fail_input("{}: \\{} inside a character class is not supported", where, e);
      }
      continue;
    }
    if (in_class && c == '[') {
      if (i + 1 < pattern.size() && pattern[i + 1] == ':') {  // a POSIX class, [:alpha:]
        const size_t close = pattern.find(":]", i + 2);
        if (close == std::string_view::npos) fail_input("{}: an unclosed POSIX class", where);
        out.append(pattern.substr(i, close + 2 - i));
        i = close + 1;
        continue;
      }
      fail_input("{}: a character class inside a character class is not supported", where);
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

struct Pattern::Impl {
  std::string literal;
  std::string regex, where;  // the regex as the file gives it, and where it is (for messages)
  pcre2_code* code = nullptr;
  ~Impl() {
    if (code) pcre2_code_free(code);
  }

  // A match that PCRE2 gave up on. Its limits stop a regex that backtracks without end (a
  // nested repetition such as (a+)+ on a long run): the file's pattern is at fault for that
  // text, an InputError naming both.
  [[noreturn]] void match_failed(int rc, std::string_view text, size_t at) const {
    const bool limit = rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
                       rc == PCRE2_ERROR_HEAPLIMIT || rc == PCRE2_ERROR_JIT_STACKLIMIT;
    const std::string applied = fmt::format("applied to {} bytes of text from byte {} ('{}')",
                                            text.size() - at, at, printable(text.substr(at), 40));
    if (limit)
      fail_input(
          "{}: the regex '{}' hit PCRE2's match limit (catastrophic backtracking) {}; rewrite "
          "it without nested repetition such as (a+)+",
          where, printable(regex), applied);
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(rc, message, sizeof message);
    fail("{}: the regex '{}' failed {}: PCRE2 error {} ({})", where, printable(regex), applied, rc,
         reinterpret_cast<const char*>(message));
  }
};

Pattern::Pattern(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Pattern::~Pattern() = default;
Pattern::Pattern(Pattern&&) noexcept = default;
Pattern& Pattern::operator=(Pattern&&) noexcept = default;

Pattern Pattern::literal(std::string text) {
  auto impl = std::make_unique<Impl>();
  impl->literal = std::move(text);
  return Pattern(std::move(impl));
}

Pattern Pattern::regex(const std::string& oniguruma, const std::string& where) {
  const std::string translated = oniguruma_to_pcre2(oniguruma, where);
  auto impl = std::make_unique<Impl>();
  impl->regex = oniguruma;
  impl->where = where;
  int error = 0;
  PCRE2_SIZE offset = 0;
  impl->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                             PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &error, &offset, nullptr);
  if (!impl->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    fail_input("{}: the regex '{}' does not compile: {} (at offset {})", where,
               printable(oniguruma), reinterpret_cast<const char*>(message), offset);
  }
  pcre2_jit_compile(impl->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter
  return Pattern(std::move(impl));
}

std::vector<Span> Pattern::find_all(std::string_view text) const {
  std::vector<Span> spans;
  if (!impl_->code) {
    const std::string& needle = impl_->literal;
    if (needle.empty()) return spans;
    for (size_t at = text.find(needle); at != std::string_view::npos;
         at = text.find(needle, at + needle.size()))
      spans.push_back({at, at + needle.size()});
    return spans;
  }
  const std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create_from_pattern(impl_->code, nullptr), &pcre2_match_data_free);
  if (!match) fail("PCRE2: out of memory");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t at = 0;
  while (at < text.size()) {
    // The text was checked once; PCRE2 would otherwise re-check all of it on every call.
    const int rc = pcre2_match(impl_->code, subject, text.size(), at, PCRE2_NO_UTF_CHECK,
                               match.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) impl_->match_failed(rc, text, at);
    const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match.get());
    if (span[1] > span[0]) {
      spans.push_back({span[0], span[1]});
      at = span[1];
    } else {  // an empty match: move on by one character
      at = span[0];
      if (at >= text.size()) break;
      unicode::next_code_point(text, at);
    }
  }
  return spans;
}

Pattern read_pattern(const nlohmann::json& j, const std::string& where) {
  const std::string at = where + ".pattern";
  using tokenizer_json::Json;
  const Json* pattern = tokenizer_json::find(j, "pattern");
  if (!pattern || !pattern->is_object() || pattern->size() != 1)
    fail_input("{} must be {{\"String\": ...}} or {{\"Regex\": ...}}", at);
  if (const Json* s = tokenizer_json::find(*pattern, "String")) {
    if (!s->is_string()) fail_input("{}.String must be a string", at);
    return Pattern::literal(s->get<std::string>());
  }
  if (const Json* r = tokenizer_json::find(*pattern, "Regex")) {
    if (!r->is_string()) fail_input("{}.Regex must be a string", at);
    return Pattern::regex(r->get<std::string>(), at);
  }
  fail_input("{} must be {{\"String\": ...}} or {{\"Regex\": ...}}, got {}", at, pattern->dump());
}

std::string replace_all(const Pattern& pattern, const std::string& text,
                        const std::string& content) {
  std::string out;
  size_t at = 0;
  for (const Span& m : pattern.find_all(text)) {
    out.append(text, at, m.begin - at);
    out += content;
    at = m.end;
  }
  out.append(text, at);
  return out;
}

}  // namespace st
