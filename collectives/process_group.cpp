#include "collectives/process_group.hpp"

namespace st {

const char* algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::automatic:
      return "auto";
    case Algorithm::mpi:
      return "mpi";
    case Algorithm::ring:
      return "ring";
    case Algorithm::shm:
      return "shm";
  }
  return "?";
}

Algorithm parse_algorithm(const std::string& text, const std::string& what) {
  if (text == "auto") return Algorithm::automatic;
  if (text == "mpi") return Algorithm::mpi;
  if (text == "ring") return Algorithm::ring;
  if (text == "shm") return Algorithm::shm;
  fail_input("{}: '{}' is not a collective algorithm (expected auto, mpi, ring or shm)", what,
             text);
}

void check_all_gather(const ProcessGroup& g, const Tensor& input, const Tensor& output) {
  if (input.dtype() != output.dtype())
    fail("all_gather on group '{}': input '{}' is {} but output '{}' is {}", g.name(), input.name(),
         dtype_name(input.dtype()), output.name(), dtype_name(output.dtype()));
  if (output.numel() != input.numel() * g.size())
    fail("all_gather on group '{}': output '{}' has {} elements but needs {} x {} = {}", g.name(),
         output.name(), output.numel(), g.size(), input.numel(), input.numel() * g.size());
  input.raw();  // meta tensors fail here, naming the tensor
  output.raw();
}

void check_reduce_scatter(const ProcessGroup& g, const Tensor& input, const Tensor& output) {
  if (output.dtype() != DType::f32)
    fail("reduce_scatter on group '{}': output '{}' is {} but must be fp32", g.name(),
         output.name(), dtype_name(output.dtype()));
  if (input.dtype() != DType::f32 && input.dtype() != DType::bf16)
    fail("reduce_scatter on group '{}': input '{}' is {} but must be fp32 or bf16", g.name(),
         input.name(), dtype_name(input.dtype()));
  if (input.numel() != output.numel() * g.size())
    fail("reduce_scatter on group '{}': input '{}' has {} elements but needs {} x {} = {}",
         g.name(), input.name(), input.numel(), g.size(), output.numel(),
         output.numel() * g.size());
  input.raw();
  output.raw();
}

void check_all_reduce(const ProcessGroup& g, const Tensor& buffer, const CollectiveOptions& o) {
  if (buffer.dtype() != DType::f32 && buffer.dtype() != DType::f64)
    fail("all_reduce on group '{}': '{}' is {} but must be fp32 or fp64", g.name(), buffer.name(),
         dtype_name(buffer.dtype()));
  (void)o;
  buffer.raw();
}

}  // namespace st
