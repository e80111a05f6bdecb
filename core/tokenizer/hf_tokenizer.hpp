#pragma once
// A Hugging Face tokenizer.json (BPE models: GPT-2, Llama 3, Qwen2/3, SmolLM, Mistral/Llama 2
// style SentencePiece BPE with byte fallback), computing the ids Hugging Face's tokenizers give
// for encode(text, add_special_tokens=False): added tokens found in the raw text, the rest
// normalized, pre-tokenized and run through the model. A component this reader does not
// implement is refused by name when the file is loaded, never approximated.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace st {

class HfTokenizer {
 public:
  // `path`: a tokenizer.json, or a folder holding one (and tokenizer_config.json, read when
  // present for the section separator). InputErrors name the file and the place in it.
  static HfTokenizer load(const std::string& path);
  // From parsed files: tokenizer.json's object (named `file` in messages) and
  // tokenizer_config.json's (an empty object when there is none; `config_path` names it).
  static HfTokenizer from_json(const nlohmann::json& j, const std::string& file,
                               const nlohmann::json& config, const std::string& config_path);
  ~HfTokenizer();
  HfTokenizer(HfTokenizer&&) noexcept;
  HfTokenizer& operator=(HfTokenizer&&) noexcept;

  // `text` must be valid UTF-8 (an InputError names the first bad byte's offset).
  std::vector<int32_t> encode(std::string_view text) const;
  // Through the file's decoder. An id the tokenizer does not have is skipped, as Hugging Face
  // does (a model's vocabulary may be padded past its tokenizer's: Qwen3's 151,936 to 151,669).
  std::string decode(const int32_t* ids, size_t n) const;
  // One more than the largest id of the vocabulary and the added tokens.
  int64_t vocab_size() const;
  const std::string& json_path() const;
  // The tokenizer files beside tokenizer.json that a model folder carries (tokenizer.json,
  // tokenizer_config.json, special_tokens_map.json when present).
  std::vector<std::string> files() const;

  // What `tokenize --sections` puts around each section: the post-processor's template's
  // special tokens, else tokenizer_config.json's bos_token (and eos_token when add_eos_token),
  // else <|endoftext|> (GPT-2's and Qwen's document separator). Empty when none is named.
  const std::vector<int32_t>& section_prefix() const;
  const std::vector<int32_t>& section_suffix() const;

 private:
  struct Impl;
  explicit HfTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The text cut at "\n\n" (empty pieces kept); each piece, "\n\n" appended, encoded between the
// section prefix and suffix. An InputError when the tokenizer names no separator.
std::vector<int32_t> encode_sections(const HfTokenizer& tokenizer, std::string_view text);

}  // namespace st
