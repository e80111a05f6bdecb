#pragma once
// Tensor parallelism's collectives (core/model/tensor_parallel.hpp) over a process group: the
// mesh's TP group, whose ranks hold slices of the same parameters. Each call blocks the compute
// until its result is in place, so all of its time is exposed: counted here, per step.
#include <cstdint>

#include "collectives/process_group.hpp"
#include "core/model/tensor_parallel.hpp"

namespace st {

// What the TP collectives cost since the last reset: the compute thread's time blocked in them
// (all of their time), the bytes of the buffers they reduced or gathered, and how many ran.
struct TpCommStats {
  double ms = 0;
  int64_t bytes = 0, calls = 0;
};

class GroupTensorParallel final : public TensorParallel {
 public:
  // `symmetric`: the model's collective operands in the group's symmetric memory.
  GroupTensorParallel(ProcessGroup& group, bool symmetric) : group_(group), symmetric_(symmetric) {}
  int rank() const override { return group_.rank(); }
  int size() const override { return group_.size(); }
  void all_reduce_sum(const Tensor& buffer) override;
  void all_reduce_max(const Tensor& buffer) override;
  void all_gather(const Tensor& input, const Tensor& output) override;
  void reduce_scatter_sum(const Tensor& input, const Tensor& output) override;
  // The group's symmetric memory (grown to `bytes` when nothing is in it), unless off.
  Tensor shared_buffer(std::string name, int64_t bytes) override;

  const TpCommStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

 private:
  // Runs `collective` (its Work waited for) as the compute's blocked time, counting `bytes`.
  template <class Collective>
  void timed(size_t bytes, Collective&& collective);

  ProcessGroup& group_;
  bool symmetric_;
  TpCommStats stats_;
};

}  // namespace st
