#pragma once
// Token streams for training and validation, and the batches a step trains on.
#include <cstdint>
#include <string>
#include <vector>

#include "core/data/batch.hpp"
#include "core/data/token_stream.hpp"

namespace st {

// Where a dataset's tokens come from: token files, a text file read as bytes, or neither
// (the built-in corpus).
struct DataSource {
  std::string path;  // data.path
  std::string
      tokenizer;  // data.tokenizer: a tokenizer.json (or its folder) for data.path; empty: bytes
  std::string tokens;      // data.tokens: a file or a glob
  std::string val_tokens;  // data.val_tokens; empty: the last val_fraction of `tokens`
  TokenFormat token_format = TokenFormat::automatic;
  double val_fraction = 0.05;
};

class Dataset {
 public:
  // Opens what `source` names; ids are checked against `vocab_size`. Missing, unreadable,
  // malformed, empty or too-short inputs are InputErrors naming the file.
  static Dataset open(const DataSource& source, int64_t vocab_size, int64_t seq_len);
  // Reads `path` as bytes; the last `val_fraction` of it is the validation split.
  static Dataset from_file(const std::string& path, double val_fraction, int64_t seq_len);
  // Reads `path` tokenized by the tokenizer.json `tokenizer` names (its ids checked against
  // `vocab_size`); the last `val_fraction` of it is the validation split. InputErrors start
  // with the key at fault: data.tokenizer or data.path.
  static Dataset from_tokenized_file(const std::string& path, const std::string& tokenizer,
                                     int64_t vocab_size, double val_fraction, int64_t seq_len);
  // The built-in generated corpus.
  static Dataset builtin(double val_fraction, int64_t seq_len);
  static Dataset from_text(std::string source, const std::string& text, double val_fraction,
                           int64_t seq_len);
  // `stream` split: the last `val_fraction` of it validates (when `val` is empty).
  static Dataset from_streams(const TokenStream& stream, double val_fraction, int64_t seq_len,
                              TokenStream val = {});

  const std::string& source() const { return train_.source(); }
  const TokenStream& train() const { return train_; }
  const TokenStream& val() const { return val_; }

 private:
  TokenStream train_, val_;
};

// Where the training sample with global index g starts: a pure function of (seed, g), so the
// global batch of a step is the same for every world size and every split into micro-batches.
int64_t sample_offset(uint64_t seed, uint64_t global_index, int64_t stream_tokens, int64_t seq_len);

// Rows [row_begin, row_end) of the global batch of `step`: sample indices
// step * global_batch + row. inputs/targets are int32 [rows, seq_len].
Batch training_batch(const TokenStream& tokens, uint64_t seed, int64_t step, int64_t global_batch,
                     int64_t row_begin, int64_t row_end, int64_t seq_len);

// Consecutive windows [w * seq_len, w * seq_len + seq_len + 1) for w in [first, first + rows).
Batch window_batch(const TokenStream& tokens, int64_t first, int64_t rows, int64_t seq_len);
// How many whole windows of seq_len + 1 tokens (stride seq_len) the stream holds.
int64_t window_count(const TokenStream& tokens, int64_t seq_len);

}  // namespace st
