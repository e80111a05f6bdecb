#include "models/llama/parallelize.hpp"

#include "core/model/param_plan.hpp"

namespace st {

void parallelize_llama(const LlamaConfig& config, std::vector<ParamSpec>& specs) {
  assign_block_units(specs, "model.layers.");
  const int64_t head = config.head_size();
  // With fewer KV heads than TP ranks, each rank keeps the KV head its query heads use, shared
  // with the ranks whose queries use it too (their gradients summed over them).
  const Placement kv = Placement::shard(0, head).sharing_blocks();
  assign_placements(specs, {{"self_attn.q_proj.weight", Placement::shard(0, head)},
                            {"self_attn.k_proj.weight", kv},
                            {"self_attn.v_proj.weight", kv},
                            {"self_attn.q_proj.bias", Placement::shard(0, head)},
                            {"self_attn.k_proj.bias", kv},
                            {"self_attn.v_proj.bias", kv},
                            {"self_attn.o_proj.weight", Placement::shard(1, head)},
                            {"mlp.gate_proj.weight", Placement::shard(0)},
                            {"mlp.up_proj.weight", Placement::shard(0)},
                            {"mlp.down_proj.weight", Placement::shard(1)},
                            {"model.embed_tokens.weight", Placement::shard(0)},
                            {"lm_head.weight", Placement::shard(0)}});
}

}  // namespace st
