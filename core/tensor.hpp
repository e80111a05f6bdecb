#pragma once
// Tensor: a named, shaped, typed view of 64-byte-aligned storage on the cpu, or shapes only
// on the meta device (no storage; touching its data is an error that names the tensor).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"

namespace st {

enum class Device : uint8_t { cpu, meta };

using Shape = std::vector<int64_t>;
std::string shape_string(const Shape& shape);
int64_t shape_numel(const Shape& shape);

// Owns an aligned allocation and reports it to the memory statistics.
class Storage {
 public:
  explicit Storage(size_t bytes);
  // Memory someone else allocated (a shared-memory segment): `owner` keeps it mapped while this
  // storage lives; it is counted in the statistics as an allocation of its own would be.
  Storage(void* data, size_t bytes, std::shared_ptr<const void> owner);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  std::shared_ptr<const void> owner_;  // set for memory this storage does not free
};

class Tensor {
 public:
  Tensor() = default;

  // Uninitialized storage (or none, on meta).
  static Tensor empty(std::string name, Shape shape, DType dtype, Device device = Device::cpu);
  static Tensor zeros(std::string name, Shape shape, DType dtype);
  // A tensor over `data` (64-byte aligned, numel * dtype bytes) that `owner` keeps alive.
  static Tensor external(std::string name, Shape shape, DType dtype, void* data,
                         std::shared_ptr<const void> owner);

  const std::string& name() const { return name_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const;
  int ndim() const { return int(shape_.size()); }
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool defined() const { return !shape_.empty() || data_ != nullptr; }
  bool is_meta() const { return device_ == Device::meta; }

  // Typed access; checks device and dtype and names the tensor when they are wrong.
  template <class T>
  T* data() const {
    check_access(dtype_of<T>());
    return static_cast<T*>(data_);
  }
  void* raw() const {
    check_access(dtype_);
    return data_;
  }

  // Same storage, another shape with the same number of elements.
  Tensor view(Shape shape) const;
  // Rows [begin, end) along the first dimension.
  Tensor slice(int64_t begin, int64_t end) const;
  // A tensor of its own name, shape and dtype inside this one's storage, starting
  // `byte_offset` bytes in (one allocation carved into many; meta stays meta).
  Tensor carve(std::string name, Shape shape, DType dtype, size_t byte_offset) const;
  Tensor renamed(std::string name) const;
  void zero_();

 private:
  void check_access(DType wanted) const;

  std::string name_;
  Shape shape_;
  DType dtype_ = DType::f32;
  Device device_ = Device::cpu;
  std::shared_ptr<Storage> storage_;
  void* data_ = nullptr;
};

}  // namespace st
