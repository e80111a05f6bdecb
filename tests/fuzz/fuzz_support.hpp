#pragma once
// What the fuzz targets share: the model they check layouts against (the seed corpora were
// made with it: `shardtrain train` with these model.* keys, then `export`), and the report of
// a refused input (printed with FUZZ_VERBOSE=1, to see what a corpus file exercises).
#include <cstdio>
#include <cstdlib>

#include "core/error.hpp"
#include "models/gpt2/gpt.hpp"

namespace st::fuzzing {

inline void refused(const InputError& e) {
  static const bool verbose = std::getenv("FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "refused: %s\n", e.what());
}

inline const GPT& small_gpt() {
  static const GPT model(
      GPTConfig{.n_layer = 1, .n_embd = 8, .n_head = 2, .block_size = 8, .vocab_size = 256},
      DType::f32);
  return model;
}

}  // namespace st::fuzzing
