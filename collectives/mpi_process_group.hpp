#pragma once
// ProcessGroup over an MPI communicator. Operations are queued to the communication thread
// and carry a per-group sequence number. How all-gathers and reduce-scatters move their data is
// this backend's option (GroupOptions::algorithm when the group is made; `automatic` picks by
// size and topology). Point-to-point operations are started on the same thread and tested
// there until done (CommThread::post).
#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "collectives/algorithms.hpp"
#include "collectives/mpi_algorithm.hpp"
#include "collectives/mpi_runtime.hpp"
#include "collectives/process_group.hpp"
#include "collectives/shm_arena.hpp"
#include "collectives/symmetric_heap.hpp"

namespace st {

class MpiProcessGroup final : public ProcessGroup {
 public:
  // The world group (MPI must be initialized: mpi_init).
  static std::unique_ptr<MpiProcessGroup> world(const GroupOptions& options = {});
  ~MpiProcessGroup() override;

  int rank() const override { return comm_.rank; }
  int size() const override { return comm_.size; }
  const std::string& name() const override { return name_; }
  // True when every rank of the group is on one node and shares its memory (shm applies).
  bool single_node() const { return single_node_; }
  // Also drops the shared-memory window when the group now spans nodes.
  void set_node_map(const std::vector<int>& node_of_rank) override;

  std::shared_ptr<Work> all_gather(const Tensor& input, const Tensor& output,
                                   const AllGatherOptions& options = {}) override;
  std::shared_ptr<Work> reduce_scatter(const Tensor& input, const Tensor& output,
                                       const ReduceScatterOptions& options = {}) override;
  // One operation with `algorithm` in place of the group's (tests and `bench collectives`
  // compare them).
  std::shared_ptr<Work> all_gather(const Tensor& input, const Tensor& output, Algorithm algorithm,
                                   const AllGatherOptions& options = {});
  std::shared_ptr<Work> reduce_scatter(const Tensor& input, const Tensor& output,
                                       Algorithm algorithm,
                                       const ReduceScatterOptions& options = {});
  std::shared_ptr<Work> all_reduce(const Tensor& buffer,
                                   const AllReduceOptions& options = {}) override;
  std::shared_ptr<Work> all_to_all(const Tensor& input, const Tensor& output,
                                   const AllToAllOptions& options = {}) override;
  std::shared_ptr<Work> broadcast(const Tensor& buffer, int root,
                                  const BroadcastOptions& options = {}) override;
  std::shared_ptr<Work> barrier(const BarrierOptions& options = {}) override;
  std::shared_ptr<Work> send(const Tensor& input, int peer,
                             const P2POptions& options = {}) override;
  std::shared_ptr<Work> recv(const Tensor& output, int peer,
                             const P2POptions& options = {}) override;
  std::unique_ptr<ProcessGroup> split(int color, int key, std::string name = "",
                                      const GroupOptions& options = {}) override;
  void reserve_symmetric(size_t bytes) override;
  Tensor symmetric_empty(std::string name, int64_t numel, DType dtype) override;
  // Bytes of symmetric memory reserved on this rank (0: none, see reserve_symmetric) and
  // operations done in place through it so far (tests check which path ran).
  size_t symmetric_capacity() const override { return heap_ ? heap_->capacity() : 0; }
  size_t symmetric_used() const { return heap_ ? heap_->used() : 0; }
  uint64_t symmetric_ops() const { return heap_ ? heap_->in_place_ops() : 0; }
  void abort(const std::string& reason) override;
  void make_interruptible() override { comm_.interrupt = &aborted_; }
  // Which algorithm `automatic` resolves to for this operation and byte count: MPI's own below
  // 64 KiB (latency-bound) and for one rank, shm within a node, ring across nodes.
  Algorithm choose(OpType op, size_t bytes) const;
  // The group's algorithm for this operation, `automatic` resolved.
  std::string transport(OpType op, size_t bytes) const override;

 private:
  // Takes ownership of comm; `my_node`: this rank's node id (gathered into nodes()).
  MpiProcessGroup(MPI_Comm comm, std::string name, int my_node);
  void update_single_node();  // on the group's thread
  std::string describe(OpType op, size_t bytes, Algorithm algorithm);
  // Queues an operation on this group's thread; it fails without running once aborted.
  std::shared_ptr<Work> submit(std::string description, double timeout_s, std::function<void()> fn);
  Algorithm resolve(Algorithm requested, OpType op, size_t bytes) const;
  // Whether an operation tries symmetric memory before `resolved` (every rank decides alike).
  bool reads_in_place(Algorithm requested, Algorithm resolved) const;
  std::shared_ptr<Work> point_to_point(OpType op, const Tensor& buffer, int peer,
                                       const P2POptions& options);
  // Keeps the buffer of an operation abort() interrupted for the life of the process.
  static void hold_forever(const Tensor& buffer);

  Comm comm_;
  std::string name_;
  std::shared_ptr<CommThread> thread_;  // this group's operations, in order
  bool shares_memory_ = false;          // MPI's shared-memory split holds the whole group
  bool single_node_ = false;
  MPI_Comm node_comm_ = MPI_COMM_NULL;
  std::unique_ptr<ShmArena> shm_;
  std::shared_ptr<SymmetricHeap> heap_;  // buffers keep it mapped
  std::atomic<uint64_t> sequence_{0};
  Algorithm algorithm_ = Algorithm::automatic;
};

}  // namespace st
