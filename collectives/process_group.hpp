#pragma once
// ProcessGroup: the collectives a sharded runtime needs, asynchronous, over a group of ranks.
// Every call checks its tensors before any communication and returns a Work handle.
#include <memory>
#include <string>

#include "collectives/work.hpp"
#include "core/tensor.hpp"

namespace st {

enum class ReduceOp { sum, avg, max };
enum class Algorithm { automatic, mpi, ring, shm };

const char* algorithm_name(Algorithm a);
// Parses "auto", "mpi", "ring", "shm"; throws InputError naming `what`.
Algorithm parse_algorithm(const std::string& text, const std::string& what);

struct CollectiveOptions {
  ReduceOp op = ReduceOp::sum;
  Algorithm algorithm = Algorithm::automatic;
  double timeout_s = 300;  // the watchdog aborts the job after this long
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const std::string& name() const = 0;

  // output[size * n] = concat over ranks of input[n]; any dtype (BF16 moves as 2-byte words).
  // In place when input is this rank's slot of output.
  virtual std::shared_ptr<Work> all_gather(const Tensor& input, const Tensor& output,
                                           const CollectiveOptions& options = {}) = 0;
  // output[n] (FP32) = reduction over ranks of input[rank * n, (rank + 1) * n); input is FP32
  // or BF16 and is accumulated in FP32. avg divides once, after the sum.
  virtual std::shared_ptr<Work> reduce_scatter(const Tensor& input, const Tensor& output,
                                               const CollectiveOptions& options = {}) = 0;
  // In place; fp32 or fp64; sum, avg or max.
  virtual std::shared_ptr<Work> all_reduce(const Tensor& buffer,
                                           const CollectiveOptions& options = {}) = 0;
  virtual std::shared_ptr<Work> broadcast(const Tensor& buffer, int root,
                                          const CollectiveOptions& options = {}) = 0;
  virtual std::shared_ptr<Work> barrier(const CollectiveOptions& options = {}) = 0;
  // Ranks with equal color form a new group, ordered by key (then by rank here).
  virtual std::unique_ptr<ProcessGroup> split(int color, int key) = 0;

  // Which algorithm `automatic` resolves to for this operation and byte count.
  virtual Algorithm choose(const std::string& op, size_t bytes) const = 0;
};

// Checks shared by every implementation; throw an Error naming the op, tensor and group.
void check_all_gather(const ProcessGroup& g, const Tensor& input, const Tensor& output);
void check_reduce_scatter(const ProcessGroup& g, const Tensor& input, const Tensor& output);
void check_all_reduce(const ProcessGroup& g, const Tensor& buffer, const CollectiveOptions& o);

}  // namespace st
