#pragma once
// The gradients of slices several TP ranks share (Placement::shares_blocks: grouped-query
// attention's KV heads when n_kv_head < tp). Each sharing rank computes its query heads' part of
// the gradient, and FSDP reduces each part over the data-parallel ranks as any other; before the
// update the parts are added over the sharing ranks, so their master copies stay bitwise equal.
#include <cstdint>
#include <utility>
#include <vector>

#include "core/model/param_spec.hpp"
#include "core/model/tensor_parallel.hpp"

namespace st {

class SharedSliceGrads {
 public:
  // Of `grads` (a parameter's index into `specs` and a FP32 gradient of it: its FSDP shard, or
  // the whole slice), those of shared slices; none without TP.
  SharedSliceGrads(const std::vector<ParamSpec>& specs,
                   const std::vector<std::pair<size_t, Tensor>>& grads);
  bool empty() const { return grads_.empty(); }
  // Adds each shared gradient over the TP ranks sharing it: one FP32 all-reduce over the TP
  // group of a buffer with a slot per distinct piece, each rank's gradients in its own.
  void sum(TensorParallel& tp);
  // The bytes sum() all-reduces.
  int64_t bytes() const { return int64_t(pieces_) * numel_ * int64_t(sizeof(float)); }
  // The same predicted from the specs alone, for gradients FSDP-sharded over `dp_shard` ranks
  // (the simulator's: every parameter's shard taken as 1 / dp_shard of it, rounded up).
  static double predicted_bytes(const std::vector<ParamSpec>& specs, int dp_shard);

 private:
  std::vector<Tensor> grads_;   // the shared slices' gradients, in the order given
  int64_t numel_ = 0;           // their elements together
  int pieces_ = 1, piece_ = 0;  // the distinct slices over the TP group, and this rank's
  Tensor buffer_;               // [pieces_ * numel_], allocated at the first sum()
};

}  // namespace st
