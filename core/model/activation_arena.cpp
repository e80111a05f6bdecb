#include "core/model/activation_arena.hpp"

namespace st {

Tensor ActivationArena::make(const char* name, Shape shape, DType dtype) {
  const int64_t at = bytes_;
  int64_t size = 0;
  if (__builtin_mul_overflow(shape_numel(shape), int64_t(dtype_size(dtype)), &size) ||
      __builtin_add_overflow(bytes_, (size + 63) / 64 * 64, &bytes_))
    fail("{}: '{}' {} takes the total past 64 bits", owner_, name, shape_string(shape));
  return carving_ ? arena_.carve(name, std::move(shape), dtype, size_t(at)) : Tensor();
}

}  // namespace st
