#include "core/data/dataset.hpp"

#include <cstring>
#include <optional>

#include "core/data/builtin_corpus.hpp"
#include "core/data/tokenizer.hpp"
#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/rng.hpp"
#include "core/tokenizer/hf_tokenizer.hpp"

namespace st {
namespace {
constexpr uint64_t kDataStream = 0xda7a;
}

Dataset Dataset::from_streams(const TokenStream& stream, double val_fraction, int64_t seq_len,
                              TokenStream val) {
  if (!(val_fraction >= 0.0 && val_fraction < 1.0))
    fail_input("the validation fraction {} must be in [0, 1)", val_fraction);
  if (stream.size() == 0) fail_input("'{}' is empty; it needs text to train on", stream.source());
  Dataset d;
  if (val.size() > 0) {
    d.train_ = stream;
    d.val_ = std::move(val);
  } else {
    const int64_t val_tokens = int64_t(double(stream.size()) * val_fraction);
    d.train_ = stream.slice(0, stream.size() - val_tokens);
    d.val_ = stream.slice(stream.size() - val_tokens, stream.size());
  }
  if (d.train_.size() < seq_len + 1)
    fail_input(
        "'{}' has {} training tokens, fewer than the sequence length + 1 = {}; use more data or "
        "a shorter sequence",
        stream.source(), d.train_.size(), seq_len + 1);
  return d;
}

Dataset Dataset::from_text(std::string source, const std::string& text, double val_fraction,
                           int64_t seq_len) {
  return from_streams(TokenStream::in_memory(std::move(source), encode_bytes(text)), val_fraction,
                      seq_len);
}

Dataset Dataset::from_file(const std::string& path, double val_fraction, int64_t seq_len) {
  return from_text(path, read_text_file(path), val_fraction, seq_len);
}

Dataset Dataset::from_tokenized_file(const std::string& path, const std::string& tokenizer,
                                     int64_t vocab_size, double val_fraction, int64_t seq_len) {
  std::optional<HfTokenizer> hf;
  try {
    hf.emplace(HfTokenizer::load(tokenizer));
  } catch (const InputError& e) {
    fail_input("data.tokenizer: {}", e.what());
  }
  if (hf->vocab_size() > vocab_size)
    fail_input("data.tokenizer '{}' has ids up to {}, beyond model.vocab_size = {}",
               hf->json_path(), hf->vocab_size() - 1, vocab_size);
  try {
    const std::string text = read_text_file(path);
    std::vector<int32_t> ids;
    try {
      ids = hf->encode(text);
    } catch (const InputError& e) {
      fail_input("'{}': {}", path, e.what());
    }
    // (A tokenizer drops what it has no token for, when it has no unk_token or byte fallback.)
    if (ids.empty() && !text.empty())
      fail_input(
          "'{}' ({} bytes) encodes to no tokens with data.tokenizer '{}': no token of its "
          "vocabulary matched the text",
          path, text.size(), hf->json_path());
    return from_streams(
        TokenStream::in_memory(fmt::format("{} (tokenized by {})", path, hf->json_path()),
                               std::move(ids)),
        val_fraction, seq_len);
  } catch (const InputError& e) {
    fail_input("data.path: {}", e.what());
  }
}

Dataset Dataset::builtin(double val_fraction, int64_t seq_len) {
  return from_text("<built-in corpus>", builtin_corpus(), val_fraction, seq_len);
}

Dataset Dataset::open(const DataSource& source, int64_t vocab_size, int64_t seq_len) {
  if (!source.path.empty() && !source.tokens.empty())
    fail_input("data.path = '{}' and data.tokens = '{}' are both set; give one", source.path,
               source.tokens);
  if (!source.val_tokens.empty() && source.tokens.empty())
    fail_input("data.val_tokens = '{}' needs data.tokens for training", source.val_tokens);
  if (!source.tokens.empty()) {
    auto open_files = [&](const std::string& pattern, const char* key) {
      const auto paths = expand_token_paths(pattern, key);
      try {
        return TokenStream::from_files(paths, source.token_format, vocab_size);
      } catch (const InputError& e) {
        fail_input("{}: {}", key, e.what());
      }
    };
    const TokenStream train = open_files(source.tokens, "data.tokens");
    TokenStream val;
    if (!source.val_tokens.empty()) val = open_files(source.val_tokens, "data.val_tokens");
    return from_streams(train, source.val_fraction, seq_len, std::move(val));
  }
  if (!source.tokenizer.empty() && source.path.empty())
    fail_input("data.tokenizer = '{}' needs data.path (the text file it tokenizes)",
               source.tokenizer);
  if (vocab_size < kByteVocabSize && source.tokenizer.empty())
    fail_input("model.vocab_size = {} is too small for byte tokens ({}); it must be at least {}",
               vocab_size, source.path.empty() ? "the built-in corpus" : "data.path",
               kByteVocabSize);
  if (!source.tokenizer.empty())  // its messages start with data.tokenizer or data.path
    return from_tokenized_file(source.path, source.tokenizer, vocab_size, source.val_fraction,
                               seq_len);
  try {
    if (source.path.empty()) return builtin(source.val_fraction, seq_len);
    return from_file(source.path, source.val_fraction, seq_len);
  } catch (const InputError& e) {
    fail_input("data.path: {}", e.what());
  }
}

int64_t sample_offset(uint64_t seed, uint64_t global_index, int64_t stream_tokens,
                      int64_t seq_len) {
  const int64_t starts = stream_tokens - seq_len;  // a sample needs seq_len + 1 tokens
  ST_CHECK(starts > 0, "stream of {} tokens too short for seq_len {}", stream_tokens, seq_len);
  return int64_t(uniform_int_at(seed, kDataStream, global_index, uint64_t(starts)));
}

Batch training_batch(const TokenStream& tokens, uint64_t seed, int64_t step, int64_t global_batch,
                     int64_t row_begin, int64_t row_end, int64_t seq_len) {
  const int64_t rows = row_end - row_begin;
  Batch batch{Tensor::empty("batch.inputs", {rows, seq_len}, DType::i32),
              Tensor::empty("batch.targets", {rows, seq_len}, DType::i32)};
  int32_t* in = batch.inputs.data<int32_t>();
  int32_t* tg = batch.targets.data<int32_t>();
  std::vector<int32_t> window(size_t(seq_len + 1));  // int32 [seq_len + 1]
  for (int64_t r = 0; r < rows; ++r) {
    const uint64_t g = uint64_t(step) * uint64_t(global_batch) + uint64_t(row_begin + r);
    const int64_t at = sample_offset(seed, g, tokens.size(), seq_len);
    tokens.read(at, seq_len + 1, window.data());
    std::memcpy(in + r * seq_len, window.data(), size_t(seq_len) * 4);
    std::memcpy(tg + r * seq_len, window.data() + 1, size_t(seq_len) * 4);
  }
  return batch;
}

int64_t window_count(const TokenStream& tokens, int64_t seq_len) {
  return tokens.size() < seq_len + 1 ? 0 : (tokens.size() - 1) / seq_len;
}

Batch window_batch(const TokenStream& tokens, int64_t first, int64_t rows, int64_t seq_len) {
  Batch batch{Tensor::empty("eval.inputs", {rows, seq_len}, DType::i32),
              Tensor::empty("eval.targets", {rows, seq_len}, DType::i32)};
  std::vector<int32_t> window(size_t(seq_len + 1));  // int32 [seq_len + 1]
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t at = (first + r) * seq_len;
    ST_CHECK(at + seq_len + 1 <= tokens.size(), "window {} out of range", first + r);
    tokens.read(at, seq_len + 1, window.data());
    std::memcpy(batch.inputs.data<int32_t>() + r * seq_len, window.data(), size_t(seq_len) * 4);
    std::memcpy(batch.targets.data<int32_t>() + r * seq_len, window.data() + 1,
                size_t(seq_len) * 4);
  }
  return batch;
}

}  // namespace st
