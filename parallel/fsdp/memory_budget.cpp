#include "parallel/fsdp/memory_budget.hpp"

#include <algorithm>

#include "core/memory_stats.hpp"
#include "parallel/fsdp/unit_topology.hpp"

namespace st {

MemoryBudget memory_budget(const BudgetInputs& in) {
  MemoryBudget b;
  int64_t shard = 0, largest_block = 0, all_padded = 0;
  for (const UnitLayout& u : *in.units) {
    shard += u.shard_numel;
    all_padded += u.padded_numel;
    if (!UnitTopology::is_root(u.unit)) largest_block = std::max(largest_block, u.padded_numel);
  }
  const int64_t root = (*in.units)[UnitTopology::kRoot].padded_numel;
  const int64_t psize = int64_t(dtype_size(in.param_dtype));
  b.master_and_grad = 8 * shard;
  b.optimizer_state = 4 * int64_t(in.optimizer_moments) * shard;
  // The root stays gathered for the whole step; blocks: the one computing plus those
  // prefetched, plus the last block of the forward, kept for the backward that starts with it.
  // Without resharding after forward every unit stays gathered until its backward.
  b.unsharded_params = in.reshard_after_forward
                           ? psize * (root + largest_block * (2 + int64_t(in.prefetch)))
                           : psize * all_padded;
  // hpZ: every block but the last of the forward keeps a 1/N slice until its backward (the
  // root and the last block stay gathered anyway).
  if (in.reshard_to > 1) {
    const int last = UnitTopology::root_and_chain(int(in.units->size())).last_forward();
    for (const UnitLayout& u : *in.units)
      if (!UnitTopology::is_root(u.unit) && u.unit != last)
        b.kept_slices += psize * u.padded_numel / in.reshard_to;
  }
  // One unit computing its gradient and one reducing; with reduce_last, every unit's; none
  // where the backward writes the shards in place.
  b.unsharded_grads = in.grads_in_place ? 0
                      : in.reduce_last  ? 4 * all_padded
                                        : 4 * (root + 2 * largest_block);
  // Quantized collectives, for the largest unit: its encoded gathers in flight (the one
  // computing's and those prefetched); one reduction's node sums and encoded pieces sent and
  // received; a replica all-reduce's encoded chunks and its FP32 chunk sum.
  int64_t largest_shard = 0;
  for (const UnitLayout& u : *in.units) largest_shard = std::max(largest_shard, u.shard_numel);
  const int S = in.shard_ranks, L = in.quantized.reduce_per_node, R = in.replicas;
  if (in.quantized.gather)
    b.quantized_buffers +=
        (1 + in.prefetch) * S * int64_t(quantized_bytes(in.gather_quantization, largest_shard));
  if (L > 0)
    b.quantized_buffers +=
        (L > 1 ? 4 * (S / L) * largest_shard : 0) +
        2 * (S / L) * int64_t(quantized_bytes(in.reduce_quantization, largest_shard));
  if (in.quantized.replicas) {
    const int64_t chunk = (largest_shard + R - 1) / R;
    b.quantized_buffers +=
        2 * R * int64_t(quantized_bytes(in.reduce_quantization, chunk)) + 4 * chunk;
  }
  b.activations = in.activation_bytes;
  return b;
}

MemoryBudget forward_memory_budget(const std::vector<UnitLayout>& units, DType param_dtype,
                                   int prefetch, int64_t activation_bytes) {
  BudgetInputs in{};
  in.units = &units;
  in.param_dtype = param_dtype;
  in.prefetch = prefetch;
  in.optimizer_moments = 0;
  in.reduce_last = false;
  in.grads_in_place = true;  // no backward: no unsharded gradient is ever made
  in.reshard_after_forward = true;
  in.reshard_to = 0;
  in.activation_bytes = activation_bytes;
  return memory_budget(in);
}

std::string memory_shortfall_on_node(int64_t per_rank_bytes, const ProcessGroup& group) {
  const auto& nodes = group.nodes();
  const int on_node = int(std::count(nodes.begin(), nodes.end(), nodes[size_t(group.rank())]));
  return machine_memory().shortfall(per_rank_bytes, on_node);
}

}  // namespace st
