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
  explicit GroupTensorParallel(ProcessGroup& group) : group_(group) {}
  int rank() const override { return group_.rank(); }
  int size() const override { return group_.size(); }
  void all_reduce_sum(const Tensor& buffer) override;
  void all_reduce_max(const Tensor& buffer) override;
  void all_gather(const Tensor& input, const Tensor& output) override;
  void reduce_scatter_sum(const Tensor& input, const Tensor& output) override;

  const TpCommStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

 private:
  // Runs `collective` (its Work waited for) as the compute's blocked time, counting `bytes`.
  template <class Collective>
  void timed(size_t bytes, Collective&& collective);

  ProcessGroup& group_;
  TpCommStats stats_;
};

}  // namespace st
