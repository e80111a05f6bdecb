#include "parallel/fsdp/buffer_pool.hpp"

#include <algorithm>

namespace st {

Tensor BufferPool::acquire(std::string name, int64_t numel, DType dtype) {
  return acquire(std::move(name), numel, dtype, false);
}

Tensor BufferPool::acquire_shared(std::string name, int64_t numel, DType dtype) {
  return acquire(std::move(name), numel, dtype, true);
}

Tensor BufferPool::acquire(std::string name, int64_t numel, DType dtype, bool shared) {
  shared = shared && allocate_shared_;  // without a shared allocator, one kind of buffer
  const int64_t bytes = numel * int64_t(dtype_size(dtype));
  Tensor t;
  auto it = free_.find({numel, dtype, shared});
  if (it != free_.end() && !it->second.empty()) {
    t = it->second.back().renamed(std::move(name));
    it->second.pop_back();
  } else if (shared) {
    t = allocate_shared_(std::move(name), numel, dtype);
    if (numel > 0) shared_buffers_.insert(t.raw());
  } else {
    t = Tensor::empty(std::move(name), {numel}, dtype);
  }
  in_use_ += bytes;
  peak_in_use_ = std::max(peak_in_use_, in_use_);
  return t;
}

void BufferPool::release(Tensor buffer) {
  if (!buffer.defined()) return;
  const int64_t bytes = int64_t(buffer.nbytes());
  in_use_ -= bytes;
  const bool shared = buffer.numel() > 0 && shared_buffers_.count(buffer.raw());
  free_[{buffer.numel(), buffer.dtype(), shared}].push_back(std::move(buffer));
}

}  // namespace st
