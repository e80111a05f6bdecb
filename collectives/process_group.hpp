#pragma once
// ProcessGroup: the collectives a sharded runtime needs, asynchronous, over a group of ranks.
// Every call checks its tensors before any communication and returns a Work handle.
#include <memory>
#include <string>
#include <vector>

#include "collectives/work.hpp"
#include "core/tensor.hpp"

namespace st {

enum class OpType { all_gather, reduce_scatter, all_reduce, broadcast, barrier, split };
enum class ReduceOp { sum, avg, max };
// How the data moves: MPI's built-in, a ring of point-to-point steps, or a shared-memory window
// on one node; `automatic` lets the backend choose by operation, size and topology.
enum class Algorithm { automatic, mpi, ring, shm };

const char* op_name(OpType op);
const char* algorithm_name(Algorithm a);

// The watchdog aborts the job when an operation has not finished after this long.
constexpr double kDefaultTimeoutS = 300;

struct AllGatherOptions {
  Algorithm algorithm = Algorithm::automatic;
  double timeout_s = kDefaultTimeoutS;
};
struct ReduceScatterOptions {
  ReduceOp op = ReduceOp::sum;  // sum or avg
  Algorithm algorithm = Algorithm::automatic;
  double timeout_s = kDefaultTimeoutS;
};
struct AllReduceOptions {
  ReduceOp op = ReduceOp::sum;
  double timeout_s = kDefaultTimeoutS;
};
struct BroadcastOptions {
  double timeout_s = kDefaultTimeoutS;
};
struct BarrierOptions {
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
  // Overrides the node map for experiments on one host: ranks r and r' share a node when
  // r / k == r' / k; groups split from this one inherit it, and a group spanning these nodes
  // never takes a shared-memory path. Collective; before any other operation.
  virtual void set_ranks_per_node(int ranks_per_node);

  // output[size * n] = concat over ranks of input[n]; any dtype (BF16 moves as 2-byte words).
  // In place when input is this rank's slot of output.
  virtual std::shared_ptr<Work> all_gather(const Tensor& input, const Tensor& output,
                                           const AllGatherOptions& options = {}) = 0;
  // output[n] (FP32) = reduction over ranks of input[rank * n, (rank + 1) * n); input is FP32
  // or BF16 and is accumulated in FP32. avg divides once, after the sum.
  virtual std::shared_ptr<Work> reduce_scatter(const Tensor& input, const Tensor& output,
                                               const ReduceScatterOptions& options = {}) = 0;
  // In place; fp32 or fp64 (sum, avg, max) or i64 (sum, max: exact agreement on integers).
  virtual std::shared_ptr<Work> all_reduce(const Tensor& buffer,
                                           const AllReduceOptions& options = {}) = 0;
  virtual std::shared_ptr<Work> broadcast(const Tensor& buffer, int root,
                                          const BroadcastOptions& options = {}) = 0;
  virtual std::shared_ptr<Work> barrier(const BarrierOptions& options = {}) = 0;
  // Collective. Ranks with equal color form a new group, ordered by key, then by rank; a
  // negative color joins no group (nullptr). The group is called `name`, or "<this>/<color>".
  virtual std::unique_ptr<ProcessGroup> split(int color, int key, std::string name = "") = 0;

 protected:
  std::vector<int> nodes_;
};

// Checks shared by every implementation; throw an Error naming the op, tensor and group.
void check_all_gather(const ProcessGroup& g, const Tensor& input, const Tensor& output);
void check_reduce_scatter(const ProcessGroup& g, const Tensor& input, const Tensor& output);
void check_all_reduce(const ProcessGroup& g, const Tensor& buffer, const AllReduceOptions& o);

}  // namespace st
