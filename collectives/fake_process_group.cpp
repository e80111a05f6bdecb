#include "collectives/fake_process_group.hpp"

#include <barrier>
#include <cstring>

#include "collectives/reduce_kernels.hpp"

namespace st {

struct FakeProcessGroup::Shared {
  explicit Shared(int n) : sync(n), inputs(size_t(n)), outputs(size_t(n)) {}
  std::barrier<> sync;
  std::vector<const void*> inputs;
  std::vector<void*> outputs;
};

std::vector<std::unique_ptr<FakeProcessGroup>> FakeProcessGroup::create(int size) {
  if (size < 1) fail("FakeProcessGroup::create: size {} must be at least 1", size);
  auto shared = std::make_shared<Shared>(size);
  std::vector<std::unique_ptr<FakeProcessGroup>> groups;
  for (int r = 0; r < size; ++r)
    groups.push_back(std::unique_ptr<FakeProcessGroup>(new FakeProcessGroup(r, size, shared)));
  return groups;
}

FakeProcessGroup::FakeProcessGroup(int rank, int size, std::shared_ptr<Shared> shared)
    : rank_(rank), size_(size), shared_(std::move(shared)) {}

template <class Body>
std::shared_ptr<Work> FakeProcessGroup::rendezvous(const char* op, const void* in, void* out,
                                                   Body&& body) {
  auto work =
      std::make_shared<Work>(fmt::format("{} on group 'fake' (rank {} of {})", op, rank_, size_));
  shared_->inputs[size_t(rank_)] = in;
  shared_->outputs[size_t(rank_)] = out;
  shared_->sync.arrive_and_wait();
  std::exception_ptr error;
  try {
    body();
  } catch (...) {
    error = std::current_exception();
  }
  shared_->sync.arrive_and_wait();  // nobody reuses a buffer another rank still reads
  work->finish(error);
  return work;
}

std::shared_ptr<Work> FakeProcessGroup::all_gather(const Tensor& input, const Tensor& output,
                                                   const CollectiveOptions&) {
  check_all_gather(*this, input, output);
  const size_t bytes = input.nbytes();
  char* out = static_cast<char*>(output.raw());
  return rendezvous("all_gather", input.raw(), out, [&] {
    for (int r = 0; r < size_; ++r)
      std::memmove(out + size_t(r) * bytes, shared_->inputs[size_t(r)], bytes);
  });
}

std::shared_ptr<Work> FakeProcessGroup::reduce_scatter(const Tensor& input, const Tensor& output,
                                                       const CollectiveOptions& options) {
  check_reduce_scatter(*this, input, output);
  if (options.op == ReduceOp::max) fail("reduce_scatter on group 'fake': max is not supported");
  const size_t n = size_t(output.numel()), esize = dtype_size(input.dtype());
  const DType dtype = input.dtype();
  float* out = output.data<float>();
  return rendezvous("reduce_scatter", input.raw(), out, [&] {
    const size_t offset = size_t(rank_) * n * esize;
    load_f32(out, static_cast<const char*>(shared_->inputs[0]) + offset, dtype, n);
    for (int r = 1; r < size_; ++r)
      add_into(out, static_cast<const char*>(shared_->inputs[size_t(r)]) + offset, dtype, n);
    if (options.op == ReduceOp::avg)
      for (size_t i = 0; i < n; ++i) out[i] /= float(size_);
  });
}

std::shared_ptr<Work> FakeProcessGroup::all_reduce(const Tensor& buffer,
                                                   const CollectiveOptions& options) {
  check_all_reduce(*this, buffer, options);
  const size_t n = size_t(buffer.numel());
  const DType dtype = buffer.dtype();
  void* data = buffer.raw();
  // Every rank computes the same reduction, in rank order, into a private copy first.
  auto reduce = [&]<class T>(T) {
    std::vector<T> acc(n);
    for (size_t i = 0; i < n; ++i) {
      T v = static_cast<const T*>(shared_->inputs[0])[i];
      for (int r = 1; r < size_; ++r) {
        const T x = static_cast<const T*>(shared_->inputs[size_t(r)])[i];
        v = options.op == ReduceOp::max ? std::max(v, x) : v + x;
      }
      acc[i] = options.op == ReduceOp::avg ? v / T(size_) : v;
    }
    shared_->sync.arrive_and_wait();  // all ranks have read every input before anyone writes
    std::memcpy(data, acc.data(), n * sizeof(T));
  };
  return rendezvous("all_reduce", data, data, [&] {
    if (dtype == DType::f32)
      reduce(float{});
    else
      reduce(double{});
  });
}

std::shared_ptr<Work> FakeProcessGroup::broadcast(const Tensor& buffer, int root,
                                                  const CollectiveOptions&) {
  if (root < 0 || root >= size_)
    fail("broadcast on group 'fake': root {} is not a rank of a group of {}", root, size_);
  void* data = buffer.raw();
  const size_t bytes = buffer.nbytes();
  return rendezvous("broadcast", data, data, [&] {
    if (rank_ != root) std::memcpy(data, shared_->inputs[size_t(root)], bytes);
  });
}

std::shared_ptr<Work> FakeProcessGroup::barrier(const CollectiveOptions&) {
  return rendezvous("barrier", nullptr, nullptr, [] {});
}

std::unique_ptr<ProcessGroup> FakeProcessGroup::split(int, int) {
  fail("FakeProcessGroup does not support split; use MpiProcessGroup under mpirun");
}

}  // namespace st
