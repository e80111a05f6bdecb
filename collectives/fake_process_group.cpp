#include "collectives/fake_process_group.hpp"

#include <algorithm>
#include <barrier>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

#include "collectives/pending_work.hpp"
#include "collectives/reduce_kernels.hpp"
#include "core/bf16.hpp"

namespace st {

struct FakeProcessGroup::Shared {
  explicit Shared(int n) : sync(n), inputs(size_t(n)), outputs(size_t(n)), split_args(size_t(n)) {}
  std::barrier<> sync;
  std::vector<const void*> inputs;
  std::vector<void*> outputs;
  // split(): every rank's (color, key), and the rendezvous of each new group by color.
  std::vector<std::pair<int, int>> split_args;
  std::map<int, std::shared_ptr<Shared>> split_children;
  std::mutex split_mutex;
  // Point to point: messages sent before their recv, and recvs posted before their message,
  // each in order (so a pair's messages of one tag match in the order they were sent).
  struct Message {
    int from, to, tag;
    std::vector<char> bytes;
  };
  struct PostedRecv {
    int from, to, tag;
    char* out;
    size_t bytes;
    std::string description;
    std::shared_ptr<PendingWork> work;
  };
  std::mutex p2p_mutex;
  std::deque<Message> messages;
  std::deque<PostedRecv> recvs;
};

namespace {
// Delivers `bytes` into a posted recv, or fails it when the sizes differ.
void deliver(const FakeProcessGroup::Shared::PostedRecv& r, const char* bytes, size_t n) {
  if (n != r.bytes) {
    r.work->finish(std::make_exception_ptr(Error(fmt::format(
        "{}: the message sent is {} bytes (a send and its recv must have the same size)",
        r.description, n))));
    return;
  }
  if (n > 0) std::memcpy(r.out, bytes, n);  // an empty message may have no buffer at all
  r.work->finish();
}
}  // namespace

std::vector<std::unique_ptr<FakeProcessGroup>> FakeProcessGroup::create(int size) {
  if (size < 1) fail("FakeProcessGroup::create: size {} must be at least 1", size);
  auto shared = std::make_shared<Shared>(size);
  const std::vector<int> nodes(static_cast<size_t>(size), 0);
  std::vector<std::unique_ptr<FakeProcessGroup>> groups;
  for (int r = 0; r < size; ++r)
    groups.push_back(
        std::unique_ptr<FakeProcessGroup>(new FakeProcessGroup(r, size, "fake", nodes, shared)));
  return groups;
}

FakeProcessGroup::FakeProcessGroup(int rank, int size, std::string name, std::vector<int> nodes,
                                   std::shared_ptr<Shared> shared)
    : rank_(rank), size_(size), name_(std::move(name)), shared_(std::move(shared)) {
  nodes_ = std::move(nodes);
}

template <class Body>
std::shared_ptr<Work> FakeProcessGroup::rendezvous(OpType op, const void* in, void* out,
                                                   Body&& body) {
  auto work = std::make_shared<PendingWork>(
      fmt::format("{} on group '{}' (rank {} of {})", op_name(op), name_, rank_, size_));
  if (aborted()) fail_aborted(work->description());
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
                                                   const AllGatherOptions&) {
  check_all_gather(*this, input, output);
  const size_t bytes = input.nbytes();
  char* out = static_cast<char*>(output.raw());
  return rendezvous(OpType::all_gather, input.raw(), out, [&] {
    for (int r = 0; r < size_; ++r)
      std::memmove(out + size_t(r) * bytes, shared_->inputs[size_t(r)], bytes);
  });
}

std::shared_ptr<Work> FakeProcessGroup::all_to_all(const Tensor& input, const Tensor& output,
                                                   const AllToAllOptions&) {
  check_all_to_all(*this, input, output);
  const size_t chunk = input.nbytes() / size_t(size_);
  char* out = static_cast<char*>(output.raw());
  return rendezvous(OpType::all_to_all, input.raw(), out, [&] {
    for (int r = 0; r < size_; ++r)
      std::memcpy(out + size_t(r) * chunk,
                  static_cast<const char*>(shared_->inputs[size_t(r)]) + size_t(rank_) * chunk,
                  chunk);
  });
}

std::shared_ptr<Work> FakeProcessGroup::reduce_scatter(const Tensor& input, const Tensor& output,
                                                       const ReduceScatterOptions& options) {
  check_reduce_scatter(*this, input, output);
  if (options.op == ReduceOp::max)
    fail("reduce_scatter on group '{}': max is not supported", name_);
  const size_t n = size_t(output.numel()), esize = dtype_size(input.dtype());
  const DType dtype = input.dtype();
  void* result = output.raw();
  const bool to_bf16 = output.dtype() == DType::bf16;
  return rendezvous(OpType::reduce_scatter, input.raw(), result, [&] {
    // A BF16 output is the FP32 result rounded once.
    std::vector<float> sum(to_bf16 ? n : 0);
    float* out = to_bf16 ? sum.data() : static_cast<float*>(result);
    const size_t offset = size_t(rank_) * n * esize;
    load_f32(out, static_cast<const char*>(shared_->inputs[0]) + offset, dtype, n);
    for (int r = 1; r < size_; ++r)
      add_into(out, static_cast<const char*>(shared_->inputs[size_t(r)]) + offset, dtype, n);
    if (options.op == ReduceOp::avg)
      for (size_t i = 0; i < n; ++i) out[i] /= float(size_);
    if (to_bf16) convert_f32_to_bf16(out, static_cast<bf16*>(result), n);
  });
}

std::shared_ptr<Work> FakeProcessGroup::all_reduce(const Tensor& buffer,
                                                   const AllReduceOptions& options) {
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
  return rendezvous(OpType::all_reduce, data, data, [&] {
    if (dtype == DType::f32)
      reduce(float{});
    else if (dtype == DType::f64)
      reduce(double{});
    else
      reduce(int64_t{});
  });
}

std::shared_ptr<Work> FakeProcessGroup::broadcast(const Tensor& buffer, int root,
                                                  const BroadcastOptions&) {
  if (root < 0 || root >= size_)
    fail("broadcast on group '{}': root {} is not a rank of a group of {}", name_, root, size_);
  void* data = buffer.raw();
  const size_t bytes = buffer.nbytes();
  return rendezvous(OpType::broadcast, data, data, [&] {
    if (rank_ != root) std::memcpy(data, shared_->inputs[size_t(root)], bytes);
  });
}

std::shared_ptr<Work> FakeProcessGroup::send(const Tensor& input, int peer,
                                             const P2POptions& options) {
  check_p2p(*this, OpType::send, input, peer, options);
  auto work = std::make_shared<PendingWork>(
      fmt::format("{} on group '{}' (rank {} of {})",
                  describe_p2p(OpType::send, input, peer, options.tag), name_, rank_, size_));
  if (aborted()) fail_aborted(work->description());
  const char* data = static_cast<const char*>(input.raw());
  const size_t n = input.nbytes();
  Shared& s = *shared_;
  {
    std::lock_guard lock(s.p2p_mutex);
    auto waiting = std::find_if(s.recvs.begin(), s.recvs.end(), [&](const auto& r) {
      return r.from == rank_ && r.to == peer && r.tag == options.tag;
    });
    if (waiting != s.recvs.end()) {
      deliver(*waiting, data, n);
      s.recvs.erase(waiting);
    } else {
      s.messages.push_back({rank_, peer, options.tag, std::vector<char>(data, data + n)});
    }
  }
  work->finish();
  return work;
}

std::shared_ptr<Work> FakeProcessGroup::recv(const Tensor& output, int peer,
                                             const P2POptions& options) {
  check_p2p(*this, OpType::recv, output, peer, options);
  auto work = std::make_shared<PendingWork>(
      fmt::format("{} on group '{}' (rank {} of {})",
                  describe_p2p(OpType::recv, output, peer, options.tag), name_, rank_, size_));
  if (aborted()) fail_aborted(work->description());
  Shared::PostedRecv r{peer,
                       rank_,
                       options.tag,
                       static_cast<char*>(output.raw()),
                       output.nbytes(),
                       work->description(),
                       work};
  Shared& s = *shared_;
  std::lock_guard lock(s.p2p_mutex);
  auto sent = std::find_if(s.messages.begin(), s.messages.end(), [&](const auto& m) {
    return m.from == peer && m.to == rank_ && m.tag == options.tag;
  });
  if (sent != s.messages.end()) {
    deliver(r, sent->bytes.data(), sent->bytes.size());
    s.messages.erase(sent);
  } else {
    s.recvs.push_back(std::move(r));
  }
  return work;
}

std::shared_ptr<Work> FakeProcessGroup::barrier(const BarrierOptions&) {
  return rendezvous(OpType::barrier, nullptr, nullptr, [] {});
}

std::unique_ptr<ProcessGroup> FakeProcessGroup::split(int color, int key, std::string name,
                                                      const GroupOptions&) {
  Shared& s = *shared_;
  s.split_args[size_t(rank_)] = {color, key};
  s.sync.arrive_and_wait();
  // The members of this rank's new group, in (key, rank) order.
  std::vector<std::pair<int, int>> members;  // (key, old rank)
  for (int r = 0; r < size_; ++r)
    if (color >= 0 && s.split_args[size_t(r)].first == color)
      members.push_back({s.split_args[size_t(r)].second, r});
  std::sort(members.begin(), members.end());
  // The group's first member creates its rendezvous; the others pick it up.
  if (!members.empty() && members.front().second == rank_) {
    std::lock_guard lock(s.split_mutex);
    s.split_children[color] = std::make_shared<Shared>(int(members.size()));
  }
  s.sync.arrive_and_wait();
  std::shared_ptr<Shared> child;
  if (!members.empty()) {
    std::lock_guard lock(s.split_mutex);
    child = s.split_children.at(color);
  }
  s.sync.arrive_and_wait();  // everyone holds its child: the table can be cleared
  if (rank_ == 0) {
    std::lock_guard lock(s.split_mutex);
    s.split_children.clear();
  }
  if (!child) return nullptr;
  const int new_rank = int(std::find_if(members.begin(), members.end(),
                                        [&](const auto& m) { return m.second == rank_; }) -
                           members.begin());
  std::vector<int> nodes;
  for (const auto& m : members) nodes.push_back(nodes_[size_t(m.second)]);
  return std::unique_ptr<ProcessGroup>(new FakeProcessGroup(
      new_rank, int(members.size()), name.empty() ? fmt::format("{}/{}", name_, color) : name,
      std::move(nodes), std::move(child)));
}

}  // namespace st
