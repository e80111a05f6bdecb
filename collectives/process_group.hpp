#pragma once
// ProcessGroup: the collectives a sharded runtime needs, asynchronous, over a group of ranks.
// Every call checks its tensors before any communication and returns a Work handle.
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <optional>

#include "collectives/mpi_algorithm.hpp"
#include "collectives/work.hpp"
#include "core/tensor.hpp"

namespace st {

enum class OpType {
  all_gather,
  reduce_scatter,
  all_reduce,
  all_to_all,
  broadcast,
  barrier,
  split,
  send,
  recv
};
enum class ReduceOp { sum, avg, max };

const char* op_name(OpType op);

// The watchdog aborts the job when an operation has not finished after this long.
constexpr double kDefaultTimeoutS = 300;

// What to do, never how: how the data moves is the backend's, chosen when a group is made.
struct GroupOptions {
  // The MPI backend's algorithm for the group's all-gathers and reduce-scatters (the
  // in-process backend has no choice to make); unset: the parent group's.
  std::optional<Algorithm> algorithm;
};
struct AllGatherOptions {
  double timeout_s = kDefaultTimeoutS;
};
struct ReduceScatterOptions {
  ReduceOp op = ReduceOp::sum;  // sum or avg
  double timeout_s = kDefaultTimeoutS;
};
struct AllReduceOptions {
  ReduceOp op = ReduceOp::sum;
  double timeout_s = kDefaultTimeoutS;
};
struct AllToAllOptions {
  double timeout_s = kDefaultTimeoutS;
};
struct BroadcastOptions {
  double timeout_s = kDefaultTimeoutS;
};
struct BarrierOptions {
  double timeout_s = kDefaultTimeoutS;
};
// The largest tag every MPI library accepts (the standard's minimum for MPI_TAG_UB).
constexpr int kMaxTag = 32767;
struct P2POptions {
  int tag = 0;  // 0-kMaxTag: a send matches the peer's recv of the same tag
  double timeout_s = kDefaultTimeoutS;
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const std::string& name() const = 0;
  // The node of each rank of this group (ids shared by the whole job; ranks on one node share
  // memory), for placement checks, algorithm choice and summaries.
  const std::vector<int>& nodes() const { return nodes_; }
  // True when the group's ranks sit on more than one node.
  bool spans_nodes() const;
  // Overrides the node map for experiments on one host: rank r is on node node_of_rank[r]
  // (the mesh computes it: parallel/mesh_layout.hpp); groups split from this one inherit it, and
  // a group spanning these nodes never takes a shared-memory path. Collective; before any other
  // operation.
  virtual void set_node_map(const std::vector<int>& node_of_rank);

  // output[size * n] = concat over ranks of input[n]; any dtype (BF16 moves as 2-byte words).
  // In place when input is this rank's slot of output.
  virtual std::shared_ptr<Work> all_gather(const Tensor& input, const Tensor& output,
                                           const AllGatherOptions& options = {}) = 0;
  // output[n] = reduction over ranks of input[rank * n, (rank + 1) * n); input is FP32 or BF16
  // and is accumulated in FP32; output is FP32, or BF16 (the FP32 result rounded once, to
  // nearest even). avg divides once, after the sum.
  virtual std::shared_ptr<Work> reduce_scatter(const Tensor& input, const Tensor& output,
                                               const ReduceScatterOptions& options = {}) = 0;
  // In place; fp32 or fp64 (sum, avg, max) or i64 (sum, max: exact agreement on integers).
  virtual std::shared_ptr<Work> all_reduce(const Tensor& buffer,
                                           const AllReduceOptions& options = {}) = 0;
  // output[size * n] = concat over ranks r of rank r's input[rank * n, (rank + 1) * n): chunk r
  // of every rank's input goes to rank r. Any dtype, moved as bytes; input and output distinct.
  virtual std::shared_ptr<Work> all_to_all(const Tensor& input, const Tensor& output,
                                           const AllToAllOptions& options = {}) = 0;
  virtual std::shared_ptr<Work> broadcast(const Tensor& buffer, int root,
                                          const BroadcastOptions& options = {}) = 0;
  virtual std::shared_ptr<Work> barrier(const BarrierOptions& options = {}) = 0;
  // Point to point (between pipeline stages): `input` goes to group rank `peer` (not this one),
  // into that rank's recv of the same tag; messages between two ranks with one tag arrive in
  // the order they were sent (MPI's non-overtaking rule). Any dtype, moved as bytes; sizes
  // must agree (a recv of another size fails naming both). Both return at once: a send is
  // done when its buffer may be reused, a recv when its output holds the message. Either side
  // may post first, and any number may be outstanding, so two ranks sending to each other
  // before receiving do not deadlock.
  virtual std::shared_ptr<Work> send(const Tensor& input, int peer,
                                     const P2POptions& options = {}) = 0;
  virtual std::shared_ptr<Work> recv(const Tensor& output, int peer,
                                     const P2POptions& options = {}) = 0;
  // Collective. Ranks with equal color form a new group, ordered by key, then by rank; a
  // negative color joins no group (nullptr). The group is called `name`, or "<this>/<color>".
  virtual std::unique_ptr<ProcessGroup> split(int color, int key, std::string name = "",
                                              const GroupOptions& options = {}) = 0;

  // Symmetric memory (collectives/symmetric_heap.hpp). Collective, before the buffers, the
  // same `bytes` on every rank: room for at least `bytes` of buffers on this rank that peers
  // read in place, where the group's all-gathers and reduce-scatters go through shared memory;
  // nothing elsewhere. Room already there is kept when it is enough, or when any rank still
  // has a buffer in it; otherwise it is replaced by room for `bytes`.
  virtual void reserve_symmetric(size_t bytes) { (void)bytes; }
  // Not collective: a buffer in that room when it fits, ordinary memory otherwise. An
  // all-gather whose output, a reduce-scatter whose input, or an FP32 all-reduce (sum or
  // average) whose buffer is such a buffer on every rank copies each byte once.
  virtual Tensor symmetric_empty(std::string name, int64_t numel, DType dtype) {
    return Tensor::empty(std::move(name), {numel}, dtype);
  }
  // Bytes of that room on this rank (0: none: one rank, across nodes, or no shared memory).
  virtual size_t symmetric_capacity() const { return 0; }

  // c10d's abort(): ends the group. Its operations not yet begun and every later one fail at
  // once with an Error naming the group and `reason`; one already running fails at its next
  // poll where the group is interruptible (a blocking MPI call cannot be cancelled). The group
  // cannot be used again; its communicator is not freed (an operation may be pending in MPI).
  virtual void abort(const std::string& reason) = 0;
  bool aborted() const { return aborted_.load(); }
  // Makes all_reduce and barrier wait by polling, so abort() interrupts them too: for a group
  // off the training path (background checkpoint commits). Before its first operation.
  virtual void make_interruptible() {}
  // How this group moves an operation of `bytes` ("shm", "ring", "mpi", "in-process"): the
  // backend's answer, for summaries.
  virtual std::string transport(OpType op, size_t bytes) const = 0;

 protected:
  // An Error naming this group and the abort's reason (for an operation refused after it).
  [[noreturn]] void fail_aborted(const std::string& operation) const;
  // Records the reason and sets the flag; implementations add what ending their work needs.
  void mark_aborted(const std::string& reason);

  std::vector<int> nodes_;
  std::atomic<bool> aborted_{false};

 private:
  mutable std::mutex abort_mutex_;
  std::string abort_reason_;
};

// Checks shared by every implementation; throw an Error naming the op, tensor and group.
void check_all_gather(const ProcessGroup& g, const Tensor& input, const Tensor& output);
void check_reduce_scatter(const ProcessGroup& g, const Tensor& input, const Tensor& output);
void check_all_reduce(const ProcessGroup& g, const Tensor& buffer, const AllReduceOptions& o);
void check_all_to_all(const ProcessGroup& g, const Tensor& input, const Tensor& output);
void check_p2p(const ProcessGroup& g, OpType op, const Tensor& buffer, int peer,
               const P2POptions& o);
// Each side of a point-to-point operation, in a Work's description and an error.
std::string describe_p2p(OpType op, const Tensor& buffer, int peer, int tag);

}  // namespace st
