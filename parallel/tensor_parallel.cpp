#include "parallel/tensor_parallel.hpp"

#include "core/op_profile.hpp"
#include "core/timer.hpp"

namespace st {

template <class Collective>
void GroupTensorParallel::timed(size_t bytes, Collective&& collective) {
  OpScope wait(OpKind::collective_wait);
  const Timer clock;
  collective()->wait();
  stats_.ms += clock.ms();
  stats_.bytes += int64_t(bytes);
  ++stats_.calls;
}

void GroupTensorParallel::all_reduce_sum(const Tensor& buffer) {
  timed(buffer.nbytes(), [&] { return group_.all_reduce(buffer, {.op = ReduceOp::sum}); });
}

void GroupTensorParallel::all_reduce_max(const Tensor& buffer) {
  timed(buffer.nbytes(), [&] { return group_.all_reduce(buffer, {.op = ReduceOp::max}); });
}

void GroupTensorParallel::all_gather(const Tensor& input, const Tensor& output) {
  timed(output.nbytes(), [&] { return group_.all_gather(input, output); });
}

void GroupTensorParallel::reduce_scatter_sum(const Tensor& input, const Tensor& output) {
  timed(input.nbytes(),
        [&] { return group_.reduce_scatter(input, output, {.op = ReduceOp::sum}); });
}

Tensor GroupTensorParallel::shared_buffer(std::string name, int64_t bytes) {
  if (!symmetric_) return TensorParallel::shared_buffer(std::move(name), bytes);
  group_.reserve_symmetric(size_t(bytes));
  return group_.symmetric_empty(std::move(name), bytes, DType::u8);
}

}  // namespace st
