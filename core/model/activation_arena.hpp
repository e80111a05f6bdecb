#pragma once
// A model's activations as tensors carved out of one allocation (llm.c's activation memory),
// each 64-byte aligned. The model declares them in one function that the arena runs twice: the
// first pass only sums the sizes, the second carves. On Device::meta nothing is allocated and
// no tensor is made, which is how activation budgets are counted without memory.
#include <cstdint>

#include "core/tensor.hpp"

namespace st {

class ActivationArena {
 public:
  // `owner` names the model in errors ("GPT activations").
  template <class Declare>
  ActivationArena(const char* owner, Device device, Declare&& declare) : owner_(owner) {
    declare(*this);
    if (device == Device::meta) return;
    arena_ = Tensor::empty(owner, {bytes_}, DType::u8, device);
    carving_ = true;
    bytes_ = 0;
    declare(*this);
  }
  ActivationArena(ActivationArena&&) = default;
  ActivationArena& operator=(ActivationArena&&) = default;

  // The next tensor (undefined during the counting pass).
  Tensor make(const char* name, Shape shape, DType dtype);
  Tensor f32(const char* name, Shape shape) { return make(name, std::move(shape), DType::f32); }
  // Bytes of the whole arena, alignment padding included.
  int64_t bytes() const { return bytes_; }

 private:
  const char* owner_;
  Tensor arena_;
  bool carving_ = false;
  int64_t bytes_ = 0;
};

}  // namespace st
