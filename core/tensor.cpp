#include "core/tensor.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "core/memory_stats.hpp"

namespace st {

std::string shape_string(const Shape& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n))
      fail("shape {} has more elements than a 64-bit count holds", shape_string(shape));
  return n;
}

Storage::Storage(size_t bytes) : bytes_(bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  data_ = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (!data_) throw std::bad_alloc();
  note_tensor_alloc(int64_t(bytes_));
}

Storage::Storage(void* data, size_t bytes, std::shared_ptr<const void> owner)
    : data_(data), bytes_(bytes), owner_(std::move(owner)) {
  ST_CHECK(owner_ && (reinterpret_cast<uintptr_t>(data) % 64) == 0,
           "external storage needs an owner and 64-byte alignment");
  note_tensor_alloc(int64_t(bytes_));
}

Storage::~Storage() {
  if (!owner_) std::free(data_);
  note_tensor_free(int64_t(bytes_));
}

Tensor Tensor::empty(std::string name, Shape shape, DType dtype, Device device) {
  for (int64_t d : shape)
    if (d < 0) fail("tensor '{}': negative dimension in shape {}", name, shape_string(shape));
  Tensor t;
  t.name_ = std::move(name);
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  int64_t bytes = 0;
  if (__builtin_mul_overflow(shape_numel(t.shape_), int64_t(dtype_size(dtype)), &bytes))
    fail("tensor '{}' {}: its size in bytes does not fit 64 bits", t.name_, shape_string(t.shape_));
  if (device == Device::cpu) {
    try {
      t.storage_ = std::make_shared<Storage>(size_t(bytes));
    } catch (const std::bad_alloc&) {
      fail("cannot allocate {:.1f} MiB for tensor '{}' {} (out of memory)", double(bytes) / kMiB,
           t.name_, shape_string(t.shape_));
    }
    t.data_ = t.storage_->data();
  }
  return t;
}

Tensor Tensor::external(std::string name, Shape shape, DType dtype, void* data,
                        std::shared_ptr<const void> owner) {
  Tensor t = empty(std::move(name), std::move(shape), dtype, Device::meta);
  t.device_ = Device::cpu;
  t.storage_ = std::make_shared<Storage>(data, t.nbytes(), std::move(owner));
  t.data_ = data;
  return t;
}

Tensor Tensor::zeros(std::string name, Shape shape, DType dtype) {
  Tensor t = empty(std::move(name), std::move(shape), dtype);
  t.zero_();
  return t;
}

int64_t Tensor::dim(int i) const {
  if (i < 0) i += ndim();
  if (i < 0 || i >= ndim()) fail("tensor '{}' {}: no dimension {}", name_, shape_string(shape_), i);
  return shape_[size_t(i)];
}

void Tensor::check_access(DType wanted) const {
  if (device_ == Device::meta)
    fail("tensor '{}' {} is on the meta device and has no data; materialize it first", name_,
         shape_string(shape_));
  if (data_ == nullptr && numel() != 0)
    fail("tensor '{}' {} has no memory (it is unbound or was freed)", name_, shape_string(shape_));
  if (wanted != dtype_)
    fail("tensor '{}' holds {} but was accessed as {}", name_, dtype_name(dtype_),
         dtype_name(wanted));
}

Tensor Tensor::view(Shape shape) const {
  if (shape_numel(shape) != numel())
    fail("tensor '{}': cannot view {} as {} (element counts differ)", name_, shape_string(shape_),
         shape_string(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::slice(int64_t begin, int64_t end) const {
  const int64_t rows = dim(0);
  if (begin < 0 || end < begin || end > rows)
    fail("tensor '{}' {}: rows [{}, {}) out of range", name_, shape_string(shape_), begin, end);
  Tensor t = *this;
  t.shape_[0] = end - begin;
  const int64_t row_elems = rows == 0 ? 0 : numel() / rows;
  if (data_) t.data_ = static_cast<char*>(data_) + size_t(begin * row_elems) * dtype_size(dtype_);
  return t;
}

Tensor Tensor::carve(std::string name, Shape shape, DType dtype, size_t byte_offset) const {
  Tensor t;
  t.name_ = std::move(name);
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device_;
  if (byte_offset + t.nbytes() > nbytes())
    fail("tensor '{}' {} at byte {} does not fit inside '{}' ({} bytes)", t.name_,
         shape_string(t.shape_), byte_offset, name_, nbytes());
  t.storage_ = storage_;
  if (data_) t.data_ = static_cast<char*>(data_) + byte_offset;
  return t;
}

Tensor Tensor::renamed(std::string name) const {
  Tensor t = *this;
  t.name_ = std::move(name);
  return t;
}

void Tensor::zero_() {
  std::memset(raw(), 0, nbytes());
}

}  // namespace st
