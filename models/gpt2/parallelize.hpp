#pragma once
// GPT-2's parallelize plan (torchtitan's parallelize, one per family): where each parameter
// goes, kept out of the model code.
#include <vector>

#include "core/model/param_spec.hpp"
#include "models/gpt2/gpt.hpp"

namespace st {

// FSDP: the root unit 0 (wte, wpe, ln_f) and one unit per block. Placements for tensor
// parallelism, Megatron's layout over Hugging Face's Conv1D weights ([in, out]): c_attn (q, k
// and v fused along the output, each split by heads) and c_fc column-parallel, both c_proj
// row-parallel, wte vocabulary-parallel; norms, wpe and the row-parallel biases replicated.
void parallelize_gpt(const GPTConfig& config, std::vector<ParamSpec>& specs);

}  // namespace st
