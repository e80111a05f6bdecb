#pragma once
// What every family's parallelize plan needs: the block a Hugging Face parameter name belongs
// to, and setting a parameter's unit and placement by the end of its name.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/model/param_spec.hpp"

namespace st {

// The block index l of a name "PREFIX<l>.REST" ("model.layers.3.mlp..." with PREFIX
// "model.layers."), or -1 when the name does not start with PREFIX.
int64_t block_of_param(const std::string& name, const std::string& prefix);

// FSDP's units for a decoder: block l's parameters in unit l + 1, everything else (embeddings,
// final norm, head) in the root unit 0.
void assign_block_units(std::vector<ParamSpec>& specs, const std::string& block_prefix);

// Each parameter whose name ends with one of `rules`' suffixes gets that rule's placement; the
// others are replicated.
void assign_placements(std::vector<ParamSpec>& specs,
                       const std::vector<std::pair<std::string, Placement>>& rules);

}  // namespace st
