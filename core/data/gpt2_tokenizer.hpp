#pragma once
// GPT-2's byte-level BPE, read from the files GPT-2 ships (encoder.json: token -> id;
// vocab.bpe: merges in rank order), with GPT-2's pre-tokenizer pattern (contractions, letter
// runs, number runs, other runs, whitespace) matched by PCRE2 with Unicode properties.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace st {

class Gpt2Tokenizer {
 public:
  static constexpr int32_t kEndOfText = 50256;

  // Reads `dir`/encoder.json and `dir`/vocab.bpe; an InputError names a missing or malformed
  // file (and the line of a bad merge).
  static Gpt2Tokenizer load(const std::string& dir);
  ~Gpt2Tokenizer();
  Gpt2Tokenizer(Gpt2Tokenizer&&) noexcept;
  Gpt2Tokenizer& operator=(Gpt2Tokenizer&&) noexcept;

  // Any bytes: valid UTF-8 is split by the pattern; invalid bytes become pre-tokens of their
  // own, so every byte is encoded and decode(encode(text)) == text.
  std::vector<int32_t> encode(std::string_view text) const;
  // The bytes of `ids`; an id outside the vocabulary is an InputError naming it.
  std::string decode(const int32_t* ids, size_t n) const;
  int64_t vocab_size() const;

 private:
  struct Impl;
  explicit Gpt2Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// How `shardtrain tokenize --sections` cuts a text (the way the shared GPT-2 token files were
// made): split on "\n\n" (as JavaScript's String.split, empty pieces kept), and each piece,
// with "\n\n" appended, follows an end-of-text token.
std::vector<int32_t> encode_sections(const Gpt2Tokenizer& tokenizer, std::string_view text);

}  // namespace st
