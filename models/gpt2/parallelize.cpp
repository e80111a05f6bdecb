#include "models/gpt2/parallelize.hpp"

#include "core/model/param_plan.hpp"

namespace st {

void parallelize_gpt(const GPTConfig& config, std::vector<ParamSpec>& specs) {
  assign_block_units(specs, "transformer.h.");
  const int64_t head = config.n_embd / config.n_head;
  assign_placements(specs, {{"attn.c_attn.weight", Placement::shard(1, head, 3)},
                            {"attn.c_attn.bias", Placement::shard(0, head, 3)},
                            {"attn.c_proj.weight", Placement::shard(0, head)},
                            {"mlp.c_fc.weight", Placement::shard(1)},
                            {"mlp.c_fc.bias", Placement::shard(0)},
                            {"mlp.c_proj.weight", Placement::shard(0)},
                            {"transformer.wte.weight", Placement::shard(0)}});
}

}  // namespace st
