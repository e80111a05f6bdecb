#include "api/evaluate.hpp"

#include <algorithm>

namespace st {

double sharded_loss_sum(Model& model, FsdpRuntime& fsdp, int64_t windows, int64_t chunk,
                        const std::function<Batch(int64_t, int64_t)>& batch) {
  const auto forward = [&](const Batch& b) { return model.forward_loss(b, fsdp); };
  return sharded_loss_sum(forward, fsdp.group(), windows, chunk, batch, fsdp, fsdp.group());
}

double sharded_loss_sum(const std::function<double(const Batch&)>& forward,
                        ProcessGroup& split_over, int64_t windows, int64_t chunk,
                        const std::function<Batch(int64_t, int64_t)>& batch, FsdpRuntime& fsdp,
                        ProcessGroup& sum_over) {
  const int world = split_over.size(), rank = split_over.rank();
  double sum = 0;
  for (int64_t start = 0; start < windows; start += chunk) {
    const int64_t n = std::min(chunk, windows - start);
    const int64_t per_rank = (n + world - 1) / world;
    const int64_t lo = std::min(n, rank * per_rank), hi = std::min(n, lo + per_rank);
    // A rank without rows in this chunk runs one dummy row and counts nothing.
    const bool dummy = hi == lo;
    const double loss = forward(batch(dummy ? 0 : start + lo, dummy ? 1 : hi - lo));
    if (!dummy) sum += loss;
  }
  return sum_over_group(sum, fsdp, sum_over);
}

double sum_over_group(double local_sum, FsdpRuntime& fsdp, ProcessGroup& group) {
  fsdp.reshard_all();
  Tensor total = Tensor::empty("eval_sum", {1}, DType::f64);
  total.data<double>()[0] = local_sum;
  group.all_reduce(total)->wait();
  return total.data<double>()[0];
}

}  // namespace st
