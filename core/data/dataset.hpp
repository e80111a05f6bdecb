#pragma once
// Token streams for training and validation, and the batches a step trains on.
#include <cstdint>
#include <string>
#include <vector>

#include "core/data/batch.hpp"

namespace st {

class TextDataset {
 public:
  // Reads `path` as bytes; the last `val_fraction` of it is the validation split.
  // Missing, unreadable, empty or too-short files are InputErrors naming the file.
  static TextDataset from_file(const std::string& path, double val_fraction, int64_t seq_len);
  // The built-in generated corpus.
  static TextDataset builtin(double val_fraction, int64_t seq_len);
  static TextDataset from_text(std::string source, const std::string& text, double val_fraction,
                               int64_t seq_len);

  const std::string& source() const { return source_; }
  const std::vector<int32_t>& train() const { return train_; }
  const std::vector<int32_t>& val() const { return val_; }

 private:
  std::string source_;
  std::vector<int32_t> train_, val_;
};

// Where the training sample with global index g starts: a pure function of (seed, g), so the
// global batch of a step is the same for every world size and every split into micro-batches.
int64_t sample_offset(uint64_t seed, uint64_t global_index, int64_t stream_tokens, int64_t seq_len);

// Rows [row_begin, row_end) of the global batch of `step`: sample indices
// step * global_batch + row. inputs/targets are int32 [rows, seq_len].
Batch training_batch(const std::vector<int32_t>& tokens, uint64_t seed, int64_t step,
                     int64_t global_batch, int64_t row_begin, int64_t row_end, int64_t seq_len);

// Consecutive windows [w * seq_len, w * seq_len + seq_len + 1) for w in [first, first + rows).
Batch window_batch(const std::vector<int32_t>& tokens, int64_t first, int64_t rows,
                   int64_t seq_len);
// How many whole windows of seq_len + 1 tokens (stride seq_len) the stream holds.
int64_t window_count(const std::vector<int32_t>& tokens, int64_t seq_len);

}  // namespace st
