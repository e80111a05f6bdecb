#pragma once
// An in-process ProcessGroup for single-process tests of the layers above: `size` ranks that
// are threads of this process. Each rank's group object is used from its own thread; every
// collective is a rendezvous of all ranks and completes before it returns (its Work is done).
// A send is buffered (done at once); a recv is done when its message has arrived.
#include <memory>
#include <string>
#include <vector>

#include "collectives/process_group.hpp"

namespace st {

class FakeProcessGroup final : public ProcessGroup {
 public:
  // One group object per rank, all sharing one rendezvous, all on one node (set_node_map on
  // every rank's object places them on pretend nodes).
  static std::vector<std::unique_ptr<FakeProcessGroup>> create(int size);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }

  std::shared_ptr<Work> all_gather(const Tensor& input, const Tensor& output,
                                   const AllGatherOptions& options = {}) override;
  std::shared_ptr<Work> reduce_scatter(const Tensor& input, const Tensor& output,
                                       const ReduceScatterOptions& options = {}) override;
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
  // Every rank calls it; ranks of equal color form a sub-group of the same kind (ordered by
  // key, then rank) named "<name>/<color>"; a negative color gives no group (nullptr).
  std::unique_ptr<ProcessGroup> split(int color, int key, std::string name = "",
                                      const GroupOptions& options = {}) override;
  // Later operations of this rank fail at once (an in-process group has nothing to interrupt).
  void abort(const std::string& reason) override { mark_aborted(reason); }
  std::string transport(OpType, size_t) const override { return "in-process"; }

  struct Shared;

 private:
  FakeProcessGroup(int rank, int size, std::string name, std::vector<int> nodes,
                   std::shared_ptr<Shared> shared);
  // Publishes this rank's pointers, waits for all, runs `body`, waits again.
  template <class Body>
  std::shared_ptr<Work> rendezvous(OpType op, const void* in, void* out, Body&& body);

  int rank_, size_;
  std::string name_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace st
