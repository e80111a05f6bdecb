#include "core/data/dataset.hpp"

#include <cstring>

#include "core/data/builtin_corpus.hpp"
#include "core/data/tokenizer.hpp"
#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/rng.hpp"

namespace st {
namespace {
constexpr uint64_t kDataStream = 0xda7a;
}

TextDataset TextDataset::from_text(std::string source, const std::string& text, double val_fraction,
                                   int64_t seq_len) {
  if (!(val_fraction >= 0.0 && val_fraction < 1.0))
    fail_input("the validation fraction {} must be in [0, 1)", val_fraction);
  if (text.empty()) fail_input("'{}' is empty; it needs text to train on", source);
  const size_t val_bytes = size_t(double(text.size()) * val_fraction);
  const size_t train_bytes = text.size() - val_bytes;
  if (int64_t(train_bytes) < seq_len + 1)
    fail_input(
        "'{}' has {} training bytes, fewer than the sequence length + 1 = {}; use a "
        "longer file or a shorter sequence",
        source, train_bytes, seq_len + 1);
  TextDataset d;
  d.source_ = std::move(source);
  d.train_ = encode_bytes(std::string_view(text).substr(0, train_bytes));
  d.val_ = encode_bytes(std::string_view(text).substr(train_bytes));
  return d;
}

TextDataset TextDataset::from_file(const std::string& path, double val_fraction, int64_t seq_len) {
  return from_text(path, read_text_file(path), val_fraction, seq_len);
}

TextDataset TextDataset::builtin(double val_fraction, int64_t seq_len) {
  return from_text("<built-in corpus>", builtin_corpus(), val_fraction, seq_len);
}

int64_t sample_offset(uint64_t seed, uint64_t global_index, int64_t stream_tokens,
                      int64_t seq_len) {
  const int64_t starts = stream_tokens - seq_len;  // a sample needs seq_len + 1 tokens
  ST_CHECK(starts > 0, "stream of {} tokens too short for seq_len {}", stream_tokens, seq_len);
  return int64_t(uniform_int_at(seed, kDataStream, global_index, uint64_t(starts)));
}

Batch training_batch(const std::vector<int32_t>& tokens, uint64_t seed, int64_t step,
                     int64_t global_batch, int64_t row_begin, int64_t row_end, int64_t seq_len) {
  const int64_t rows = row_end - row_begin;
  Batch batch{Tensor::empty("batch.inputs", {rows, seq_len}, DType::i32),
              Tensor::empty("batch.targets", {rows, seq_len}, DType::i32)};
  int32_t* in = batch.inputs.data<int32_t>();
  int32_t* tg = batch.targets.data<int32_t>();
  for (int64_t r = 0; r < rows; ++r) {
    const uint64_t g = uint64_t(step) * uint64_t(global_batch) + uint64_t(row_begin + r);
    const int64_t at = sample_offset(seed, g, int64_t(tokens.size()), seq_len);
    std::memcpy(in + r * seq_len, tokens.data() + at, size_t(seq_len) * 4);
    std::memcpy(tg + r * seq_len, tokens.data() + at + 1, size_t(seq_len) * 4);
  }
  return batch;
}

int64_t window_count(const std::vector<int32_t>& tokens, int64_t seq_len) {
  return tokens.size() < size_t(seq_len + 1) ? 0 : (int64_t(tokens.size()) - 1) / seq_len;
}

Batch window_batch(const std::vector<int32_t>& tokens, int64_t first, int64_t rows,
                   int64_t seq_len) {
  Batch batch{Tensor::empty("eval.inputs", {rows, seq_len}, DType::i32),
              Tensor::empty("eval.targets", {rows, seq_len}, DType::i32)};
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t at = (first + r) * seq_len;
    ST_CHECK(at + seq_len + 1 <= int64_t(tokens.size()), "window {} out of range", first + r);
    std::memcpy(batch.inputs.data<int32_t>() + r * seq_len, tokens.data() + at,
                size_t(seq_len) * 4);
    std::memcpy(batch.targets.data<int32_t>() + r * seq_len, tokens.data() + at + 1,
                size_t(seq_len) * 4);
  }
  return batch;
}

}  // namespace st
