#include "parallel/tensor_parallel.hpp"

namespace st {

void GroupTensorParallel::all_reduce_sum(const Tensor& buffer) {
  group_.all_reduce(buffer, {.op = ReduceOp::sum})->wait();
}

void GroupTensorParallel::all_reduce_max(const Tensor& buffer) {
  group_.all_reduce(buffer, {.op = ReduceOp::max})->wait();
}

void GroupTensorParallel::all_gather(const Tensor& input, const Tensor& output) {
  group_.all_gather(input, output)->wait();
}

void GroupTensorParallel::reduce_scatter_sum(const Tensor& input, const Tensor& output) {
  group_.reduce_scatter(input, output, {.op = ReduceOp::sum})->wait();
}

}  // namespace st
