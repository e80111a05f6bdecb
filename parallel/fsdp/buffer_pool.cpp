#include "parallel/fsdp/buffer_pool.hpp"

#include <algorithm>

namespace st {

Tensor BufferPool::acquire(std::string name, int64_t numel, DType dtype) {
  const int64_t bytes = numel * int64_t(dtype_size(dtype));
  Tensor t;
  auto it = free_.find({numel, dtype});
  if (it != free_.end() && !it->second.empty()) {
    t = it->second.back().renamed(std::move(name));
    it->second.pop_back();
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
  free_[{buffer.numel(), buffer.dtype()}].push_back(std::move(buffer));
}

}  // namespace st
