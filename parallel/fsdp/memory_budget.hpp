#pragma once
// The analytical per-rank memory budget of DESIGN.md, term by term, so a run can print what it
// should take beside what it does take.
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "parallel/fsdp/fsdp_runtime.hpp"
#include "parallel/fsdp/unit_layout.hpp"

namespace st {

struct MemoryBudget {
  int64_t master_and_grad = 0;     // 8·P/N: FP32 master + FP32 gradient shards
  int64_t optimizer_state = 0;     // 4·k·P/N: k FP32 moments (AdamW 2, SGD 1)
  int64_t unsharded_params = 0;    // largest unit in param_dtype × (1 + prefetch) + root
  int64_t kept_slices = 0;         // reshard_after_forward = N: 1/N of every block, forward to
                                   // backward (hpZ)
  int64_t unsharded_grads = 0;     // 4·(largest unit) while reducing; every unit with reduce_last
  int64_t quantized_buffers = 0;   // encoded gathers in flight; a quantized reduction's node sums
                                   // and encoded pieces (sharding.*_quantization)
  int64_t activations = 0;         // one micro-batch's activations and scratch
  int64_t matmul_workspace = 0;    // the packed GEMM's per-thread packing buffers, when it runs
  int64_t checkpoint_staging = 0;  // checkpoint.async: a copy of the master and optimizer shards
  int64_t total() const {
    return master_and_grad + optimizer_state + unsharded_params + kept_slices + unsharded_grads +
           quantized_buffers + activations + matmul_workspace + checkpoint_staging;
  }
};

struct BudgetInputs {
  const std::vector<UnitLayout>* units;
  DType param_dtype;
  int prefetch;
  int optimizer_moments;  // FP32 state buffers per parameter element
  bool reduce_last;       // unsharded gradients of every unit kept between micro-batches
  bool grads_in_place;    // gradients_in_place(): no unsharded gradient buffers at all
  bool reshard_after_forward;
  int reshard_to;  // 0, or N: the kept slices' group
  int64_t activation_bytes;
  // Quantized collectives (FsdpRuntime::quantized()), over a shard group of `shard_ranks` and
  // `replicas` copies.
  QuantizedPlan quantized = {};
  Quantization gather_quantization = Quantization::none;
  Quantization reduce_quantization = Quantization::none;
  int shard_ranks = 1, replicas = 1;
};

MemoryBudget memory_budget(const BudgetInputs& in);

// A model loaded to run forwards only (eval, sample) or to be written out (export), on `units`:
// its FP32 master and gradient shards (the runtime makes both), the units a forward gathers in
// `param_dtype` (the root, the block computing and those prefetched) and one forward's
// `activation_bytes`; no optimizer state and no unsharded gradients.
MemoryBudget forward_memory_budget(const std::vector<UnitLayout>& units, DType param_dtype,
                                   int prefetch, int64_t activation_bytes);

// What this machine lacks for `per_rank_bytes` on each of `group`'s ranks sharing this rank's
// node ("" when it fits): MachineMemory::shortfall with the node's rank count.
std::string memory_shortfall_on_node(int64_t per_rank_bytes, const ProcessGroup& group);

}  // namespace st
