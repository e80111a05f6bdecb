#pragma once
// tokenizer.json's "pre_tokenizer": the pieces a normalized text is cut into before the model
// sees them. ByteLevel (GPT-2's pattern and byte alphabet), Split (a pattern and one of the
// behaviours Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous; invert), Digits,
// Metaspace and Sequence; anything else is refused by name.
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace st {

class PreTokenizer {
 public:
  using Emit = std::function<void(std::string_view piece)>;
  virtual ~PreTokenizer() = default;
  // Calls `emit` with each non-empty piece of `text`, in order. `first` says `text` begins the
  // whole input (Metaspace's prepend_scheme "first" prepends there only).
  virtual void split(std::string_view text, bool first, const Emit& emit) const = 0;
};

// nullptr for null (the whole text is one piece).
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& j, const std::string& where);

}  // namespace st
