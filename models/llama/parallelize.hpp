#pragma once
// Llama's parallelize plan (and Qwen2's and Qwen3's, which are Llama's architecture): where each
// parameter goes, kept out of the model code.
#include <vector>

#include "core/model/param_spec.hpp"
#include "models/llama/llama.hpp"

namespace st {

// FSDP: the root unit 0 (embed_tokens, norm, lm_head) and one unit per layer. Placements for
// tensor parallelism, Megatron's layout over Hugging Face's Linear weights ([out, in]): q, k, v
// (and their biases) and gate, up column-parallel, split by whole heads; o and down row-parallel;
// embed_tokens and lm_head vocabulary-parallel; every norm (Qwen3's q_norm and k_norm too)
// replicated.
void parallelize_llama(const LlamaConfig& config, std::vector<ParamSpec>& specs);

}  // namespace st
