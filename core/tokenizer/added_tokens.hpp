#pragma once
// tokenizer.json's "added_tokens" (special tokens and others added on top of the model's
// vocabulary): found in the text before it is pre-tokenized, the longest at the leftmost place
// first, with lstrip/rstrip (the whitespace beside a token joins it) and single_word (only where
// no word character touches it). `normalized` ones are looked for in the normalized text.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace st {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool single_word = false, lstrip = false, rstrip = false, normalized = false, special = false;
};

std::vector<AddedToken> read_added_tokens(const nlohmann::json& j, const std::string& where);

// A stretch of text: plain text (token < 0) or an added token's match.
struct Segment {
  std::string_view text;
  int32_t token = -1;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);  // those to look for
  bool empty() const { return tokens_.empty(); }
  std::vector<Segment> split(std::string_view text) const;

 private:
  std::vector<AddedToken> tokens_;  // longest first
  bool first_byte_[256] = {};
};

}  // namespace st
