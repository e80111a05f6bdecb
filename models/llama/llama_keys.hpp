#pragma once
// Llama's own [model] keys, as its own struct: what its registration reads from a ModelConfig.
#include <cstdint>

#include "models/family.hpp"

namespace st {

struct LlamaKeys {
  int64_t n_kv_head = 0;   // 0: n_head
  int64_t head_dim = 0;    // 0: n_embd / n_head
  int64_t ffn_hidden = 0;  // 0: 8·n_embd/3 rounded up to a multiple of 256
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
  bool tie_embeddings = true;
};

// The keys `config` sets over LlamaKeys' defaults (models/llama/family.cpp).
LlamaKeys llama_keys(const ModelConfig& config);

}  // namespace st
