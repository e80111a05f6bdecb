#include "collectives/process_group.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace st {

void ProcessGroup::set_node_map(const std::vector<int>& node_of_rank) {
  ST_CHECK(node_of_rank.size() == size_t(size()), "a node map of {} ranks for a group of {}",
           node_of_rank.size(), size());
  for (int n : node_of_rank) ST_CHECK(n >= 0, "node {} in a node map", n);
  nodes_ = node_of_rank;
}

void ProcessGroup::mark_aborted(const std::string& reason) {
  {
    std::lock_guard lock(abort_mutex_);
    if (aborted_.load()) return;
    abort_reason_ = reason;
  }
  aborted_ = true;
}

void ProcessGroup::fail_aborted(const std::string& operation) const {
  std::lock_guard lock(abort_mutex_);
  fail("{}: group '{}' was aborted ({})", operation, name(), abort_reason_);
}

bool ProcessGroup::spans_nodes() const {
  for (int n : nodes_)
    if (n != nodes_.front()) return true;
  return false;
}

const char* op_name(OpType op) {
  switch (op) {
    case OpType::all_gather:
      return "all_gather";
    case OpType::reduce_scatter:
      return "reduce_scatter";
    case OpType::all_reduce:
      return "all_reduce";
    case OpType::all_to_all:
      return "all_to_all";
    case OpType::broadcast:
      return "broadcast";
    case OpType::barrier:
      return "barrier";
    case OpType::split:
      return "split";
    case OpType::send:
      return "send";
    case OpType::recv:
      return "recv";
  }
  return "?";
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
  if (output.dtype() != DType::f32 && output.dtype() != DType::bf16)
    fail("reduce_scatter on group '{}': output '{}' is {} but must be fp32 or bf16", g.name(),
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

void check_all_reduce(const ProcessGroup& g, const Tensor& buffer, const AllReduceOptions& o) {
  const DType d = buffer.dtype();
  if (d != DType::f32 && d != DType::f64 && d != DType::i64)
    fail("all_reduce on group '{}': '{}' is {} but must be fp32, fp64 or i64", g.name(),
         buffer.name(), dtype_name(d));
  if (d == DType::i64 && o.op == ReduceOp::avg)
    fail("all_reduce on group '{}': '{}' is i64, which has no average", g.name(), buffer.name());
  buffer.raw();
}

void check_all_to_all(const ProcessGroup& g, const Tensor& input, const Tensor& output) {
  if (input.dtype() != output.dtype() || input.numel() != output.numel())
    fail("all_to_all on group '{}': input '{}' ({} {}) and output '{}' ({} {}) must match",
         g.name(), input.name(), input.numel(), dtype_name(input.dtype()), output.name(),
         output.numel(), dtype_name(output.dtype()));
  if (input.numel() % g.size() != 0)
    fail("all_to_all on group '{}': input '{}' has {} elements, not a multiple of its {} ranks",
         g.name(), input.name(), input.numel(), g.size());
  if (input.raw() == output.raw())
    fail("all_to_all on group '{}': input '{}' and output '{}' must be distinct buffers", g.name(),
         input.name(), output.name());
}

void check_p2p(const ProcessGroup& g, OpType op, const Tensor& buffer, int peer,
               const P2POptions& o) {
  const char* toward = op == OpType::send ? "to" : "from";
  if (peer < 0 || peer >= g.size() || peer == g.rank())
    fail("{} on group '{}': {} rank {} is not another rank of the group (rank {} of {})",
         op_name(op), g.name(), toward, peer, g.rank(), g.size());
  if (o.tag < 0 || o.tag > kMaxTag)
    fail("{} on group '{}': tag {} must be 0-{}", op_name(op), g.name(), o.tag, kMaxTag);
  buffer.raw();  // a meta tensor fails here, naming the tensor
}

std::string describe_p2p(OpType op, const Tensor& buffer, int peer, int tag) {
  return fmt::format("{} '{}' {} rank {} (tag {}, {} bytes)", op_name(op), buffer.name(),
                     op == OpType::send ? "to" : "from", peer, tag, buffer.nbytes());
}

}  // namespace st
