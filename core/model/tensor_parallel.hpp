#pragma once
// The collectives tensor parallelism runs inside a model's compute, over its tensor-parallel
// group: Megatron's f and g (an all-reduce where a row-parallel matmul's partial sums meet, or
// where a column-parallel one's input gradients do), their sequence-parallel forms (an
// all-gather before a column-parallel block, a reduce-scatter after a row-parallel one), and
// the vocabulary-parallel loss's maxima and sums. core/ states them, as UnitHooks states what
// FSDP does around a unit; parallel/tensor_parallel implements them over the mesh's TP group.
// Each call returns when its result is in place.
#include <string>

#include "core/tensor.hpp"

namespace st {

class TensorParallel {
 public:
  virtual ~TensorParallel() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In place, FP32: the sum (max) over the group's ranks, element by element.
  virtual void all_reduce_sum(const Tensor& buffer) = 0;
  virtual void all_reduce_max(const Tensor& buffer) = 0;
  // output [size * n] = every rank's input [n], in rank order (any dtype).
  virtual void all_gather(const Tensor& input, const Tensor& output) = 0;
  // output [n] = the sum over ranks of their input [rank * n, (rank + 1) * n) (FP32 or BF16
  // input, summed in FP32; FP32 or BF16 output, rounded once).
  virtual void reduce_scatter_sum(const Tensor& input, const Tensor& output) = 0;
  // Collective: `bytes` (u8) where peers can read them in place during the calls above, or
  // ordinary memory. Every rank asks for the same bytes at the same point of its compute.
  virtual Tensor shared_buffer(std::string name, int64_t bytes) {
    return Tensor::empty(std::move(name), {bytes}, DType::u8);
  }
};

}  // namespace st
