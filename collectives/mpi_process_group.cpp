#include "collectives/mpi_process_group.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <vector>

#include "collectives/mpi_runtime.hpp"
#include "core/bf16.hpp"
#include "core/error.hpp"

namespace st {
namespace {
// Below this many bytes MPI's own collectives win (latency-bound); above, ring or shm.
constexpr size_t kSmallMessageBytes = 64 * 1024;

void divide(float* x, size_t n, float by) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) x[i] /= by;
}
}  // namespace

std::unique_ptr<MpiProcessGroup> MpiProcessGroup::world(const GroupOptions& options) {
  if (!mpi_is_initialized()) fail("MpiProcessGroup::world: MPI is not initialized (call mpi_init)");
  MPI_Comm comm = MPI_COMM_NULL;
  int my_node = 0;
  CommThread::instance().run("MPI_Comm_dup of the world", 60, [&] {
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup");
    // A node is named by the lowest world rank on it (ranks sharing memory).
    MPI_Comm node = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
              "MPI_Comm_split_type");
    int world_rank = 0;
    check_mpi(MPI_Comm_rank(comm, &world_rank), "MPI_Comm_rank");
    check_mpi(MPI_Allreduce(&world_rank, &my_node, 1, MPI_INT, MPI_MIN, node), "MPI_Allreduce");
    MPI_Comm_free(&node);
  });
  auto g = std::unique_ptr<MpiProcessGroup>(new MpiProcessGroup(comm, "world", my_node));
  g->algorithm_ = options.algorithm.value_or(Algorithm::automatic);
  // Node ids 0, 1, ... in order of their lowest rank.
  std::vector<int> ids = g->nodes_;
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  for (int& n : g->nodes_) n = int(std::lower_bound(ids.begin(), ids.end(), n) - ids.begin());
  return g;
}

MpiProcessGroup::MpiProcessGroup(MPI_Comm comm, std::string name, int my_node)
    : name_(std::move(name)), thread_(CommThread::for_new_group()) {
  comm_.comm = comm;
  thread_->run("group set-up of '" + name_ + "'", 60, [&] {
    check_mpi(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check_mpi(MPI_Comm_rank(comm, &comm_.rank), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(comm, &comm_.size), "MPI_Comm_size");
    nodes_.resize(size_t(comm_.size));
    check_mpi(MPI_Allgather(&my_node, 1, MPI_INT, nodes_.data(), 1, MPI_INT, comm),
              "MPI_Allgather");
    check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node_comm_),
              "MPI_Comm_split_type");
    int node_size = 0;
    check_mpi(MPI_Comm_size(node_comm_, &node_size), "MPI_Comm_size");
    // Every rank must agree, or some would take the shm path and others not.
    int local = node_size == comm_.size, all = 0;
    check_mpi(MPI_Allreduce(&local, &all, 1, MPI_INT, MPI_LAND, comm), "MPI_Allreduce");
    shares_memory_ = all;
    if (shares_memory_) {
      int node_rank = 0;
      check_mpi(MPI_Comm_rank(node_comm_, &node_rank), "MPI_Comm_rank");
      // Ranks order the same way in both communicators (key 0 keeps the parent order).
      ST_CHECK(node_rank == comm_.rank, "node rank {} != group rank {}", node_rank, comm_.rank);
    }
    update_single_node();
  });
}

void MpiProcessGroup::update_single_node() {
  const bool one_node =
      std::all_of(nodes_.begin(), nodes_.end(), [&](int n) { return n == nodes_.front(); });
  single_node_ = shares_memory_ && one_node;
  if (single_node_ && !shm_)
    shm_ = std::make_unique<ShmArena>(Comm{node_comm_, comm_.rank, comm_.size});
  if (!single_node_) {
    shm_.reset();
    heap_.reset();
  }
}

void MpiProcessGroup::reserve_symmetric(size_t bytes) {
  if (!single_node_ || comm_.size == 1 || bytes == 0) return;
  // Every rank asks for the same bytes, so every rank returns here or none does.
  if (heap_ && heap_->capacity() >= bytes) return;
  std::string why;
  bool kept = false;
  thread_->run("symmetric memory of '" + name_ + "'", 60, [&] {
    // A heap too small is replaced only when no rank has a buffer in it (a later, larger set
    // of activations, say); otherwise it stays, and what does not fit stages.
    if (heap_) {
      int empty = heap_->live() == 0, all_empty = 0;
      check_mpi(MPI_Allreduce(&empty, &all_empty, 1, MPI_INT, MPI_LAND, node_comm_),
                "MPI_Allreduce");
      if (!all_empty) {
        kept = true;
        return;
      }
      heap_.reset();
    }
    heap_ = SymmetricHeap::create(Comm{node_comm_, comm_.rank, comm_.size}, bytes, &why);
  });
  if (kept) return;
  if (!heap_ && comm_.rank == 0)
    fmt::print(stderr,
               "warning: group '{}' has no symmetric memory ({}): its shared-memory collectives "
               "stage each byte through the window\n",
               name_, why);
}

Tensor MpiProcessGroup::symmetric_empty(std::string name, int64_t numel, DType dtype) {
  ST_CHECK(numel >= 0, "symmetric buffer '{}' of {} elements", name, numel);
  const size_t bytes = size_t(numel) * dtype_size(dtype);
  void* p = heap_ ? heap_->allocate(bytes) : nullptr;
  if (!p) return Tensor::empty(std::move(name), {numel}, dtype);
  // The buffer keeps the heap mapped, and gives its room back when it goes.
  std::shared_ptr<const void> owner(p, [heap = heap_](const void*) { heap->release(); });
  return Tensor::external(std::move(name), {numel}, dtype, p, std::move(owner));
}

void MpiProcessGroup::set_node_map(const std::vector<int>& node_of_rank) {
  ProcessGroup::set_node_map(node_of_rank);
  thread_->run("node map of '" + name_ + "'", 60, [&] { update_single_node(); });
}

MpiProcessGroup::~MpiProcessGroup() {
  // An aborted group may have a request pending in MPI: its communicator is left as it is.
  if (!mpi_is_initialized() || aborted()) return;
  thread_->run("group tear-down of '" + name_ + "'", 60, [&] {
    shm_.reset();
    heap_.reset();
    if (node_comm_ != MPI_COMM_NULL) MPI_Comm_free(&node_comm_);
    MPI_Comm_free(&comm_.comm);
  });
}

const char* algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::automatic:
      return "auto";
    case Algorithm::mpi:
      return "mpi";
    case Algorithm::ring:
      return "ring";
    case Algorithm::shm:
      return "shm";
  }
  return "?";
}

Algorithm MpiProcessGroup::choose(OpType op, size_t bytes) const {
  if (op != OpType::all_gather && op != OpType::reduce_scatter) return Algorithm::mpi;
  if (comm_.size == 1 || bytes < kSmallMessageBytes) return Algorithm::mpi;
  return single_node_ ? Algorithm::shm : Algorithm::ring;
}

bool MpiProcessGroup::reads_in_place(Algorithm requested, Algorithm resolved) const {
  // Symmetric buffers are read in place at any size: below the small-message cut too, where
  // MPI would otherwise beat staging through the window.
  return heap_ && (resolved == Algorithm::shm ||
                   (requested == Algorithm::automatic && resolved == Algorithm::mpi));
}

Algorithm MpiProcessGroup::resolve(Algorithm requested, OpType op, size_t bytes) const {
  const Algorithm a = requested == Algorithm::automatic ? choose(op, bytes) : requested;
  if (a == Algorithm::shm && !single_node_)
    fail("{} on group '{}': the shm algorithm needs every rank on one node", op_name(op), name_);
  return a;
}

std::string MpiProcessGroup::transport(OpType op, size_t bytes) const {
  if (op != OpType::all_gather && op != OpType::reduce_scatter)
    return algorithm_name(Algorithm::mpi);
  const Algorithm a = algorithm_ == Algorithm::automatic ? choose(op, bytes) : algorithm_;
  // Buffers in symmetric memory are read in place (those outside it stage through the window).
  return a == Algorithm::shm && heap_ ? "shm in place" : algorithm_name(a);
}

std::string MpiProcessGroup::describe(OpType op, size_t bytes, Algorithm algorithm) {
  return fmt::format("{} #{} on group '{}' (rank {} of {}, {} bytes, {})", op_name(op), ++sequence_,
                     name_, comm_.rank, comm_.size, bytes, algorithm_name(algorithm));
}

std::shared_ptr<Work> MpiProcessGroup::all_gather(const Tensor& input, const Tensor& output,
                                                  const AllGatherOptions& options) {
  return all_gather(input, output, algorithm_, options);
}

std::shared_ptr<Work> MpiProcessGroup::all_gather(const Tensor& input, const Tensor& output,
                                                  Algorithm algorithm,
                                                  const AllGatherOptions& options) {
  check_all_gather(*this, input, output);
  const size_t bytes = input.nbytes();
  const Algorithm a = resolve(algorithm, OpType::all_gather, output.nbytes());
  const void* in = input.raw();
  void* out = output.raw();
  const bool heap_first = reads_in_place(algorithm, a);
  return submit(describe(OpType::all_gather, output.nbytes(), a), options.timeout_s,
                [this, a, heap_first, in, out, bytes] {
                  if (heap_first && heap_->all_gather(in, out, bytes)) return;
                  if (a == Algorithm::ring)
                    ring_all_gather(comm_, in, out, bytes);
                  else if (a == Algorithm::shm)
                    shm_->all_gather(in, out, bytes);
                  else
                    mpi_all_gather(comm_, in, out, bytes);
                });
}

std::shared_ptr<Work> MpiProcessGroup::reduce_scatter(const Tensor& input, const Tensor& output,
                                                      const ReduceScatterOptions& options) {
  return reduce_scatter(input, output, algorithm_, options);
}

std::shared_ptr<Work> MpiProcessGroup::reduce_scatter(const Tensor& input, const Tensor& output,
                                                      Algorithm algorithm,
                                                      const ReduceScatterOptions& options) {
  check_reduce_scatter(*this, input, output);
  if (options.op == ReduceOp::max)
    fail("reduce_scatter on group '{}': max is not supported", name_);
  const Algorithm a = resolve(algorithm, OpType::reduce_scatter, input.nbytes());
  const void* in = input.raw();
  const DType dtype = input.dtype();
  void* result = output.raw();
  const bool to_bf16 = output.dtype() == DType::bf16;
  const size_t n = size_t(output.numel());
  const bool average = options.op == ReduceOp::avg;
  const bool heap_first = reads_in_place(algorithm, a);
  return submit(describe(OpType::reduce_scatter, input.nbytes(), a), options.timeout_s,
                [this, a, heap_first, in, dtype, result, to_bf16, n, average] {
                  // A BF16 output is the FP32 result rounded once.
                  std::vector<float> sum(to_bf16 ? n : 0);
                  float* out = to_bf16 ? sum.data() : static_cast<float*>(result);
                  if (heap_first && heap_->reduce_scatter(in, dtype, out, n)) {
                    // read in place
                  } else if (a == Algorithm::ring)
                    ring_reduce_scatter(comm_, in, dtype, out, n);
                  else if (a == Algorithm::shm)
                    shm_->reduce_scatter(in, dtype, out, n);
                  else
                    mpi_reduce_scatter(comm_, in, dtype, out, n);
                  if (average) divide(out, n, float(comm_.size));
                  if (to_bf16) convert_f32_to_bf16(out, static_cast<bf16*>(result), n);
                });
}

std::shared_ptr<Work> MpiProcessGroup::all_reduce(const Tensor& buffer,
                                                  const AllReduceOptions& options) {
  check_all_reduce(*this, buffer, options);
  void* data = buffer.raw();
  const DType dtype = buffer.dtype();
  const size_t n = size_t(buffer.numel());
  const ReduceOp op = options.op;
  ST_CHECK(n <= size_t(INT32_MAX), "all_reduce of {} elements", n);
  // An interruptible group's operation holds its buffer (see below); others do not, so a
  // caller's buffer is freed when the caller frees it.
  std::optional<Tensor> keep;
  if (comm_.interrupt) keep = buffer;
  return submit(describe(OpType::all_reduce, buffer.nbytes(), Algorithm::mpi), options.timeout_s,
                [this, data, dtype, n, op, keep = std::move(keep)] {
                  // FP32 sums in symmetric memory on every rank are read in place.
                  const bool in_place = heap_ && dtype == DType::f32 && op != ReduceOp::max &&
                                        heap_->all_reduce(static_cast<float*>(data), n);
                  try {
                    if (!in_place)
                      mpi_all_reduce(comm_, data, int(n), mpi_type(dtype),
                                     op == ReduceOp::max ? MPI_MAX : MPI_SUM);
                  } catch (...) {
                    // Interrupted by abort(): MPI still holds the request and may write into
                    // the buffer when another group's call makes progress, so it stays.
                    if (keep && comm_.interrupt->load()) hold_forever(*keep);
                    throw;
                  }
                  if (op != ReduceOp::avg) return;
                  if (dtype == DType::f32)
                    divide(static_cast<float*>(data), n, float(comm_.size));
                  else
                    for (size_t i = 0; i < n; ++i) static_cast<double*>(data)[i] /= comm_.size;
                });
}

std::shared_ptr<Work> MpiProcessGroup::all_to_all(const Tensor& input, const Tensor& output,
                                                  const AllToAllOptions& options) {
  check_all_to_all(*this, input, output);
  const char* in = static_cast<const char*>(input.raw());
  char* out = static_cast<char*>(output.raw());
  const size_t chunk = input.nbytes() / size_t(comm_.size);
  return submit(describe(OpType::all_to_all, input.nbytes(), Algorithm::mpi), options.timeout_s,
                [this, in, out, chunk] { mpi_all_to_all(comm_, in, out, chunk); });
}

std::shared_ptr<Work> MpiProcessGroup::broadcast(const Tensor& buffer, int root,
                                                 const BroadcastOptions& options) {
  if (root < 0 || root >= comm_.size)
    fail("broadcast on group '{}': root {} is not a rank of a group of {}", name_, root,
         comm_.size);
  char* data = static_cast<char*>(buffer.raw());
  const size_t bytes = buffer.nbytes();
  return submit(describe(OpType::broadcast, bytes, Algorithm::mpi), options.timeout_s,
                [this, data, bytes, root] {
                  for (size_t off = 0; off < bytes; off += kMaxPieceBytes)
                    check_mpi(MPI_Bcast(data + off, int(std::min(kMaxPieceBytes, bytes - off)),
                                        MPI_BYTE, root, comm_.comm),
                              "MPI_Bcast");
                });
}

std::shared_ptr<Work> MpiProcessGroup::barrier(const BarrierOptions& options) {
  return submit(describe(OpType::barrier, 0, Algorithm::mpi), options.timeout_s,
                [this] { mpi_barrier(comm_); });
}

void MpiProcessGroup::abort(const std::string& reason) {
  mark_aborted(reason);
}

void MpiProcessGroup::hold_forever(const Tensor& buffer) {
  static std::mutex mutex;
  static std::vector<Tensor> held;  // reachable to the end: never freed under a pending request
  std::lock_guard lock(mutex);
  held.push_back(buffer);
}

std::shared_ptr<Work> MpiProcessGroup::submit(std::string description, double timeout_s,
                                              std::function<void()> fn) {
  return thread_->submit(description, timeout_s, [this, description, fn = std::move(fn)] {
    if (aborted()) fail_aborted(description);
    fn();
  });
}

std::shared_ptr<Work> MpiProcessGroup::send(const Tensor& input, int peer,
                                            const P2POptions& options) {
  check_p2p(*this, OpType::send, input, peer, options);
  return point_to_point(OpType::send, input, peer, options);
}

std::shared_ptr<Work> MpiProcessGroup::recv(const Tensor& output, int peer,
                                            const P2POptions& options) {
  check_p2p(*this, OpType::recv, output, peer, options);
  return point_to_point(OpType::recv, output, peer, options);
}

std::shared_ptr<Work> MpiProcessGroup::point_to_point(OpType op, const Tensor& buffer, int peer,
                                                      const P2POptions& options) {
  const std::string description = fmt::format("{} #{} on group '{}' (rank {} of {})",
                                              describe_p2p(op, buffer, peer, options.tag),
                                              ++sequence_, name_, comm_.rank, comm_.size);
  char* data = static_cast<char*>(buffer.raw());
  const size_t bytes = buffer.nbytes();
  const int tag = options.tag;
  // The buffer lives as long as the operation; after an abort, as long as the process (MPI may
  // still write into it).
  return thread_->post(
      description, options.timeout_s, [=, this, keep = buffer]() -> CommThread::Test {
        if (aborted()) fail_aborted(description);
        // Messages above 1 GiB go as pieces of one tag, which arrive in order.
        const size_t pieces = std::max<size_t>(1, (bytes + kMaxPieceBytes - 1) / kMaxPieceBytes);
        auto requests = std::make_shared<std::vector<MPI_Request>>();
        for (size_t i = 0; i < pieces; ++i) {
          const size_t off = i * kMaxPieceBytes;
          const int piece = int(std::min(kMaxPieceBytes, bytes - off));
          MPI_Request request = MPI_REQUEST_NULL;
          if (op == OpType::send)
            check_mpi(MPI_Isend(data + off, piece, MPI_BYTE, peer, tag, comm_.comm, &request),
                      "MPI_Isend");
          else
            check_mpi(MPI_Irecv(data + off, piece, MPI_BYTE, peer, tag, comm_.comm, &request),
                      "MPI_Irecv");
          requests->push_back(request);
        }
        return [=, this] {
          if (aborted()) {
            hold_forever(keep);
            fail_aborted(description);
          }
          int done = 0;
          std::vector<MPI_Status> status(requests->size());
          const int rc = MPI_Testall(int(requests->size()), requests->data(), &done, status.data());
          if (rc != MPI_SUCCESS && op == OpType::recv)
            fail("{}: the message sent is larger (a send and its recv must have the same size)",
                 description);
          check_mpi(rc, "MPI_Testall");
          if (!done) return false;
          if (op == OpType::recv) {
            size_t received = 0;
            for (const MPI_Status& s : status) {
              int count = 0;
              MPI_Get_count(&s, MPI_BYTE, &count);
              received += size_t(count);
            }
            if (received != bytes)
              fail("{}: the message sent is {} bytes (a send and its recv must have the same size)",
                   description, received);
          }
          return true;
        };
      });
}

std::unique_ptr<ProcessGroup> MpiProcessGroup::split(int color, int key, std::string name,
                                                     const GroupOptions& options) {
  MPI_Comm sub = MPI_COMM_NULL;
  thread_->run(describe(OpType::split, 0, Algorithm::mpi), 60, [&] {
    check_mpi(MPI_Comm_split(comm_.comm, color < 0 ? MPI_UNDEFINED : color, key, &sub),
              "MPI_Comm_split");
  });
  if (sub == MPI_COMM_NULL) return nullptr;
  std::unique_ptr<MpiProcessGroup> group(new MpiProcessGroup(
      sub, name.empty() ? fmt::format("{}/{}", name_, color) : name, nodes_[size_t(comm_.rank)]));
  group->algorithm_ = options.algorithm.value_or(algorithm_);
  return group;
}

}  // namespace st
