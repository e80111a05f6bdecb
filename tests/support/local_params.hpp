#pragma once
// All parameters of a model on this process, unsharded: FP32 masters, the compute-dtype copy
// the model reads, and FP32 gradients, each one flat buffer. This is the single-process
// reference that the sharded runtime is tested against.
#include <vector>

#include "core/model/model.hpp"
#include "optim/optim_param.hpp"

namespace st {

class LocalParams : public UnitHooks {
 public:
  // Materializes every parameter from (seed, parameter index, element index) and binds the model.
  LocalParams(Model& model, uint64_t seed);

  // Refreshes the compute copy from the masters (a no-op alias when computing in FP32).
  void cast_for_compute();
  void zero_grads();
  std::vector<OptimParam> optim_params() const;

  Tensor master(size_t index) const { return masters_[index]; }
  Tensor grad(size_t index) const { return grads_[index]; }
  int64_t numel() const { return master_flat_.numel(); }

 private:
  Model& model_;
  Tensor master_flat_, compute_flat_, grad_flat_;
  std::vector<Tensor> masters_, grads_;
};

}  // namespace st
