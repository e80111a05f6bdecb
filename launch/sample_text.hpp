#pragma once
// How `sample` turns its prompt into ids and what it draws back into text: GPT-2's files
// (--vocab DIR), the model's tokenizer.json (a --weights folder's own, or the one the
// checkpoint's run tokenized with), or bytes; ids are shown as numbers when none applies. Text
// streams out as tokens are drawn, held back while a character's bytes are incomplete.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace st {

class SampleText {
 public:
  // `vocab`: --vocab DIR or empty; `tokenizer`: a tokenizer.json or empty; V: the model's.
  SampleText(const std::string& vocab, const std::string& tokenizer, int64_t V);
  ~SampleText();

  // --prompt-tokens checked against V, else --prompt encoded (bytes need V <= 256).
  std::vector<int32_t> prompt_ids(const std::string& prompt,
                                  const std::vector<int64_t>& prompt_tokens) const;
  // The text of ids[0, n) not yet shown, as far as it is whole (call after each new id).
  std::string next_text(const int32_t* ids, size_t n);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace st
