#pragma once
// A caching pool for the unsharded buffers FSDP allocates and frees every unit, every step
// (like PyTorch's caching allocator): a freed buffer is kept for the next request of the same
// size, so steady-state training makes no allocations and takes no page faults.
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/tensor.hpp"

namespace st {

class BufferPool {
 public:
  // Makes the buffers acquire_shared() asks for (a process group's symmetric memory).
  using Allocator = std::function<Tensor(std::string name, int64_t numel, DType dtype)>;
  void set_shared_allocator(Allocator allocate) { allocate_shared_ = std::move(allocate); }

  // A buffer of `numel` elements of `dtype`, uninitialized, named `name`.
  Tensor acquire(std::string name, int64_t numel, DType dtype);
  // The same from the shared allocator (ordinary memory when it has none): buffers a
  // collective's peers read in place. Kept apart from acquire()'s.
  Tensor acquire_shared(std::string name, int64_t numel, DType dtype);
  // Returns a buffer from acquire(). The caller must hold no other view of it.
  void release(Tensor buffer);

  int64_t peak_in_use_bytes() const { return peak_in_use_; }
  void reset_peak() { peak_in_use_ = in_use_; }

 private:
  Tensor acquire(std::string name, int64_t numel, DType dtype, bool shared);

  // By (numel, dtype, from the shared allocator).
  std::map<std::tuple<int64_t, DType, bool>, std::vector<Tensor>> free_;
  std::set<const void*> shared_buffers_;  // what acquire_shared() handed out
  Allocator allocate_shared_;
  int64_t in_use_ = 0, peak_in_use_ = 0;
};

}  // namespace st
