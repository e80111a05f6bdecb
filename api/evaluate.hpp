#pragma once
// Loss over a set of windows with a sharded model: the windows are split over the ranks in
// chunks, every rank runs the same number of forwards (they gather parameters together).
#include <cstdint>
#include <functional>

#include "core/model/model.hpp"
#include "parallel/fsdp/fsdp_runtime.hpp"

namespace st {

// Sum of the token losses of windows [0, windows), all ranks together. `batch(first, rows)`
// builds the windows [first, first + rows); chunks of `chunk` windows are split over the ranks.
double sharded_loss_sum(Model& model, FsdpRuntime& fsdp, int64_t windows, int64_t chunk,
                        const std::function<Batch(int64_t, int64_t)>& batch);
// The same with the forward given (`forward(batch)`: this rank's share of its loss sum), the
// chunks split over `split_over`'s ranks, and the sums added up over `sum_over`.
double sharded_loss_sum(const std::function<double(const Batch&)>& forward,
                        ProcessGroup& split_over, int64_t windows, int64_t chunk,
                        const std::function<Batch(int64_t, int64_t)>& batch, FsdpRuntime& fsdp,
                        ProcessGroup& sum_over);

// The end of every evaluation: the gathered parameters released, then this rank's loss sum
// added up over `group`.
double sum_over_group(double local_sum, FsdpRuntime& fsdp, ProcessGroup& group);

}  // namespace st
