#pragma once
// The patterns of tokenizer.json ({"String": s} or {"Regex": r}). Hugging Face compiles regexes
// with Oniguruma; they run here on PCRE2 after the few constructs whose meaning differs are
// rewritten to Oniguruma's: \s and \S (White_Space, NEL included), \w and \W (letters, marks,
// decimal digits, connector punctuation), \h and \H (hex digits), and ^ and $ at every line.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace st {

struct Span {
  size_t begin, end;
};

class Pattern {
 public:
  static Pattern literal(std::string text);
  // `where` names the pattern in messages (e.g. "'f/tokenizer.json': pre_tokenizer.pattern").
  static Pattern regex(const std::string& oniguruma, const std::string& where);
  ~Pattern();
  Pattern(Pattern&&) noexcept;
  Pattern& operator=(Pattern&&) noexcept;

  // The non-overlapping matches, left to right (empty matches skipped). `text` is valid UTF-8.
  std::vector<Span> find_all(std::string_view text) const;

 private:
  struct Impl;
  explicit Pattern(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// j["pattern"]: {"String": s} or {"Regex": r}; `where` names j in messages.
Pattern read_pattern(const nlohmann::json& j, const std::string& where);
// `text` with every match of `pattern` replaced by `content`.
std::string replace_all(const Pattern& pattern, const std::string& text,
                        const std::string& content);

// The PCRE2 pattern for an Oniguruma one (exposed for tests).
std::string oniguruma_to_pcre2(std::string_view pattern, const std::string& where);

}  // namespace st
