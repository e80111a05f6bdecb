#pragma once
// A model's activations as tensors carved out of one allocation (llm.c's activation memory),
// each 64-byte aligned. The model declares them in one function that the arena runs twice: the
// first pass only sums the sizes, the second carves. On Device::meta nothing is allocated and
// no tensor is made, which is how activation budgets are counted without memory.
//
// Tensors declared `shared` (those tensor parallelism's collectives read from peers) are carved
// from a second allocation the caller provides: symmetric memory of the TP group, where peers
// read them in place (collectives/symmetric_heap.hpp). Without a provider they are ordinary.
#include <cstdint>
#include <functional>
#include <string>

#include "core/tensor.hpp"

namespace st {

class ActivationArena {
 public:
  // Memory for the shared tensors: `bytes` of u8, named `name`.
  using SharedAllocator = std::function<Tensor(std::string name, int64_t bytes)>;

  // `owner` names the model in errors ("GPT activations").
  template <class Declare>
  ActivationArena(const char* owner, Device device, Declare&& declare,
                  const SharedAllocator& shared_allocator = {})
      : owner_(owner) {
    declare(*this);
    if (device == Device::meta) return;
    arena_ = Tensor::empty(owner, {local_bytes_}, DType::u8, device);
    const std::string shared_name = std::string(owner) + " (shared)";
    shared_ = shared_allocator && shared_bytes_ > 0
                  ? shared_allocator(shared_name, shared_bytes_)
                  : Tensor::empty(shared_name, {shared_bytes_}, DType::u8, device);
    carving_ = true;
    local_bytes_ = shared_bytes_ = 0;
    declare(*this);
  }
  ActivationArena(ActivationArena&&) = default;
  ActivationArena& operator=(ActivationArena&&) = default;

  // The next tensor (undefined during the counting pass).
  Tensor make(const char* name, Shape shape, DType dtype);
  Tensor f32(const char* name, Shape shape) { return make(name, std::move(shape), DType::f32); }
  // The next tensor peers read during a collective (undefined during the counting pass).
  Tensor shared(const char* name, Shape shape, DType dtype);
  // Bytes of the whole arena, both allocations, alignment padding included.
  int64_t bytes() const { return local_bytes_ + shared_bytes_; }

 private:
  Tensor carve(const Tensor& from, int64_t& bytes, const char* name, Shape shape, DType dtype);

  const char* owner_;
  Tensor arena_, shared_;
  bool carving_ = false;
  int64_t local_bytes_ = 0, shared_bytes_ = 0;
};

}  // namespace st
