#include "launch/sample_text.hpp"

#include <fmt/format.h>

#include <optional>

#include "core/data/gpt2_tokenizer.hpp"
#include "core/data/tokenizer.hpp"
#include "core/error.hpp"
#include "core/tokenizer/hf_tokenizer.hpp"

namespace st {

struct SampleText::Impl {
  int64_t V = 0;
  std::optional<Gpt2Tokenizer> gpt2;
  std::optional<HfTokenizer> hf;
  size_t start = 0;  // the first id whose text is not wholly shown
  size_t shown = 0;  // bytes of that text shown already

  std::string decode(const int32_t* ids, size_t n) const {
    if (gpt2) return gpt2->decode(ids, n);
    if (hf) return hf->decode(ids, n);
    return decode_bytes(ids, n);
  }
};

SampleText::SampleText(const std::string& vocab, const std::string& tokenizer, int64_t V)
    : impl_(std::make_unique<Impl>()) {
  impl_->V = V;
  if (!vocab.empty()) {
    impl_->gpt2.emplace(Gpt2Tokenizer::load(vocab));
    if (impl_->gpt2->vocab_size() != V)
      fail_input("sample: --vocab '{}' has {} tokens but the model's vocabulary is {}", vocab,
                 impl_->gpt2->vocab_size(), V);
  } else if (!tokenizer.empty()) {
    impl_->hf.emplace(HfTokenizer::load(tokenizer));
    if (impl_->hf->vocab_size() > V)
      fail_input("sample: tokenizer '{}' has ids up to {}, beyond the model's vocabulary of {}",
                 impl_->hf->json_path(), impl_->hf->vocab_size() - 1, V);
  }
}

SampleText::~SampleText() = default;

std::vector<int32_t> SampleText::prompt_ids(const std::string& prompt,
                                            const std::vector<int64_t>& prompt_tokens) const {
  std::vector<int32_t> ids;
  if (!prompt_tokens.empty()) {
    for (size_t i = 0; i < prompt_tokens.size(); ++i) {
      if (prompt_tokens[i] < 0 || prompt_tokens[i] >= impl_->V)
        fail_input("sample: --prompt-tokens: id {} (position {}) is outside the vocabulary [0, {})",
                   prompt_tokens[i], i, impl_->V);
      ids.push_back(int32_t(prompt_tokens[i]));
    }
    return ids;
  }
  if (impl_->gpt2) return impl_->gpt2->encode(prompt);
  if (impl_->hf) return impl_->hf->encode(prompt);
  if (impl_->V > kByteVocabSize)
    fail_input(
        "sample: the model's vocabulary has {} tokens, not bytes: --prompt needs --vocab DIR "
        "(GPT-2's encoder.json and vocab.bpe) or the model's tokenizer.json (a --weights folder "
        "holding one, a checkpoint trained with data.tokenizer), or give --prompt-tokens",
        impl_->V);
  return encode_bytes(prompt);
}

std::string SampleText::next_text(const int32_t* ids, size_t n) {
  Impl& m = *impl_;
  if (!m.gpt2 && !m.hf && m.V > kByteVocabSize) {  // ids only
    std::string out;
    for (size_t i = m.start; i < n; ++i) out += fmt::format("{} ", ids[i]);
    m.start = n;
    return out;
  }
  // The pending ids decoded after one id of context (decoders treat a first token apart, and
  // byte-level text may end inside a character), less what that context alone gives.
  const size_t context = m.start > 0 ? m.start - 1 : 0;
  const std::string head = m.start > context ? m.decode(ids + context, m.start - context) : "";
  const std::string text = m.decode(ids + context, n - context);
  const bool incomplete = text.size() >= 3 && text.compare(text.size() - 3, 3, "\xEF\xBF\xBD") == 0;
  if (incomplete || text.size() < head.size() + m.shown) return "";
  std::string out = text.substr(head.size() + m.shown);
  m.start = n;
  m.shown = 0;
  return out;
}

}  // namespace st
