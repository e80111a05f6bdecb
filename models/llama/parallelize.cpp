#include "models/llama/parallelize.hpp"

#include "core/model/param_plan.hpp"

namespace st {

void parallelize_llama(const LlamaConfig& config, std::vector<ParamSpec>& specs) {
  assign_block_units(specs, "model.layers.");
  const int64_t head = config.head_size();
  assign_placements(specs, {{"self_attn.q_proj.weight", Placement::shard(0, head)},
                            {"self_attn.k_proj.weight", Placement::shard(0, head)},
                            {"self_attn.v_proj.weight", Placement::shard(0, head)},
                            {"self_attn.q_proj.bias", Placement::shard(0, head)},
                            {"self_attn.k_proj.bias", Placement::shard(0, head)},
                            {"self_attn.v_proj.bias", Placement::shard(0, head)},
                            {"self_attn.o_proj.weight", Placement::shard(1, head)},
                            {"mlp.gate_proj.weight", Placement::shard(0)},
                            {"mlp.up_proj.weight", Placement::shard(0)},
                            {"mlp.down_proj.weight", Placement::shard(1)},
                            {"model.embed_tokens.weight", Placement::shard(0)},
                            {"lm_head.weight", Placement::shard(0)}});
}

}  // namespace st
