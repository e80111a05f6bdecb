#pragma once
// Tensor parallelism's collectives (core/model/tensor_parallel.hpp) over a process group: the
// mesh's TP group, whose ranks hold slices of the same parameters.
#include "collectives/process_group.hpp"
#include "core/model/tensor_parallel.hpp"

namespace st {

class GroupTensorParallel final : public TensorParallel {
 public:
  explicit GroupTensorParallel(ProcessGroup& group) : group_(group) {}
  int rank() const override { return group_.rank(); }
  int size() const override { return group_.size(); }
  void all_reduce_sum(const Tensor& buffer) override;
  void all_reduce_max(const Tensor& buffer) override;
  void all_gather(const Tensor& input, const Tensor& output) override;
  void reduce_scatter_sum(const Tensor& input, const Tensor& output) override;

 private:
  ProcessGroup& group_;
};

}  // namespace st
