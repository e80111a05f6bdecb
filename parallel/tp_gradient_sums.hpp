#pragma once
// Gradients the TP ranks compute parts of, summed over the TP group once a step, after FSDP's
// reductions and before the norm and the update (Megatron sums sequence-parallel gradients so):
//   - shared slices (Placement::shares_blocks: grouped-query attention's KV heads when
//     n_kv_head < tp): each sharing rank computes its query heads' part;
//   - partial gradients of parameters every TP rank holds whole (Model::tp_partial_grads: the
//     norms under sequence parallelism, from each rank's rows; Qwen3's q/k norms, from each
//     rank's heads).
// FSDP reduces each part over the data-parallel ranks as any other gradient; sums are linear,
// so adding the parts over TP afterwards gives the whole gradient, and every TP rank the same
// bits (one all-reduce), so their master copies stay bitwise equal.
#include <cstdint>
#include <utility>
#include <vector>

#include "core/model/param_spec.hpp"
#include "core/model/tensor_parallel.hpp"

namespace st {

class TpGradientSums {
 public:
  // Of `grads` (a parameter's index into `specs` and a FP32 gradient of it: its FSDP shard, or
  // the whole parameter), those of shared slices and of the parameters in `partial`; none
  // without TP.
  TpGradientSums(const std::vector<ParamSpec>& specs, const std::vector<size_t>& partial,
                 const std::vector<std::pair<size_t, Tensor>>& grads);
  bool empty() const { return shared_.empty() && partial_.empty(); }
  // One FP32 all-reduce over the TP group of a buffer with a slot per distinct piece of the
  // shared slices (each rank's in its own) and one region every rank adds its partial
  // gradients into.
  void sum(TensorParallel& tp);
  // The bytes sum() all-reduces.
  int64_t bytes() const {
    return (int64_t(pieces_) * shared_numel_ + partial_numel_) * int64_t(sizeof(float));
  }
  // The same predicted from the specs alone, for gradients FSDP-sharded over `dp_shard` ranks
  // (the simulator's: every parameter's shard taken as 1 / dp_shard of it, rounded up); with
  // `units`, only the parameters of those FSDP units (a pipeline rank's).
  static double predicted_bytes(const std::vector<ParamSpec>& specs,
                                const std::vector<size_t>& partial, int dp_shard,
                                const std::vector<int>* units = nullptr);

 private:
  std::vector<Tensor> shared_, partial_;  // the gradients, in the order given
  int64_t shared_numel_ = 0, partial_numel_ = 0;
  int pieces_ = 1, piece_ = 0;  // the distinct shared slices over the TP group, and this rank's
  Tensor buffer_;               // allocated at the first sum()
};

}  // namespace st
