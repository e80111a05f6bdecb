#include "core/model/activation_arena.hpp"

namespace st {

Tensor ActivationArena::carve(const Tensor& from, int64_t& bytes, const char* name, Shape shape,
                              DType dtype) {
  const int64_t at = bytes;
  int64_t size = 0;
  if (__builtin_mul_overflow(shape_numel(shape), int64_t(dtype_size(dtype)), &size) ||
      __builtin_add_overflow(bytes, (size + 63) / 64 * 64, &bytes) || bytes > INT64_MAX / 2)
    fail("{}: '{}' {} takes the total past 64 bits", owner_, name, shape_string(shape));
  return carving_ ? from.carve(name, std::move(shape), dtype, size_t(at)) : Tensor();
}

Tensor ActivationArena::make(const char* name, Shape shape, DType dtype) {
  return carve(arena_, local_bytes_, name, std::move(shape), dtype);
}

Tensor ActivationArena::shared(const char* name, Shape shape, DType dtype) {
  return carve(shared_, shared_bytes_, name, std::move(shape), dtype);
}

}  // namespace st
