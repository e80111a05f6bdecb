#pragma once
// A caching pool for the unsharded buffers FSDP allocates and frees every unit, every step
// (like PyTorch's caching allocator): a freed buffer is kept for the next request of the same
// size, so steady-state training makes no allocations and takes no page faults.
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "core/tensor.hpp"

namespace st {

class BufferPool {
 public:
  // A buffer of `numel` elements of `dtype`, uninitialized, named `name`.
  Tensor acquire(std::string name, int64_t numel, DType dtype);
  // Returns a buffer from acquire(). The caller must hold no other view of it.
  void release(Tensor buffer);

  int64_t peak_in_use_bytes() const { return peak_in_use_; }
  void reset_peak() { peak_in_use_ = in_use_; }

 private:
  std::map<std::pair<int64_t, DType>, std::vector<Tensor>> free_;  // by (numel, dtype)
  int64_t in_use_ = 0, peak_in_use_ = 0;
};

}  // namespace st
