#pragma once
// Symmetric memory on one node (what torch's symmetric memory is to GPUs): each rank of a group
// owns a shared-memory segment and maps every peer's. A buffer allocated in this rank's segment
// can be read by peers in place, so an all-gather or reduce-scatter whose every rank's input
// lies in its segment copies each byte once, straight into its destination, instead of staging
// it through the shared window first (ShmArena: two copies a byte).
//
// Each operation publishes, in this rank's segment header, its sequence number and where its
// input sits; every rank reads every peer's before deciding, so all take the same path. An
// operation that used the heap returns only after every peer has finished reading this rank's
// input: the caller may then overwrite or reuse it, as after any collective.
#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/algorithms.hpp"
#include "core/dtype.hpp"

namespace st {

class SymmetricHeap {
 public:
  // Collective over `c` (every rank on one node, each asking for the same `bytes`): each rank
  // maps a segment of `bytes` of its own and every peer's. nullptr on every rank when any rank
  // cannot (the shared-memory filesystem lacks room for all of them, say): `why` names the reason.
  static std::shared_ptr<SymmetricHeap> create(const Comm& c, size_t bytes, std::string* why);
  ~SymmetricHeap();
  SymmetricHeap(const SymmetricHeap&) = delete;
  SymmetricHeap& operator=(const SymmetricHeap&) = delete;

  // Not collective: 64-byte-aligned room for `bytes` in this rank's segment, or nullptr when it
  // is full. Allocation is a bump of a pointer (callers keep their buffers, as FSDP's pool
  // does); once every allocation is released the whole segment is free again (a second model
  // on the same group). No operation reads a buffer after it completes, so a released one is
  // nobody's.
  void* allocate(size_t bytes);
  void release();
  size_t capacity() const { return capacity_; }
  size_t used() const { return used_.load(); }
  int64_t live() const { return live_.load(); }  // allocations not yet released

  // Collectives (on the group's thread). When every rank's `in` lies in its segment, do the
  // operation reading peers in place and return true; otherwise do nothing and return false on
  // every rank (the caller stages it). Same results, bit for bit, as ShmArena's.
  // out[size * bytes] = concat of every rank's in[bytes]. In place when `in` is this rank's
  // slot of `out`; when only `out` lies in the segment, `in` is first copied into that slot
  // (the copy it needs anyway) and peers read it from there.
  bool all_gather(const void* in, void* out, size_t bytes);
  // out[n] = FP32 sum over ranks, in rank order, of in[rank * n, +n) (in is FP32 or BF16).
  bool reduce_scatter(const void* in, DType in_dtype, float* out, size_t n);
  // data[n] (FP32, in the segment on every rank) = the sum over ranks, in rank order: each rank
  // sums its n/size of the elements reading every peer's in place, then copies the others'
  // sums from their owners. The same bits on every rank.
  bool all_reduce(float* data, size_t n);

  // Operations done in place so far (tests check which path ran).
  uint64_t in_place_ops() const { return in_place_ops_; }

 private:
  // sequence @0, input offset @8, done @64, reduced @128 (each counter its own cache line)
  static constexpr size_t kHeaderBytes = 192;
  static constexpr uint64_t kNotHere = ~uint64_t(0);

  SymmetricHeap(const Comm& c, size_t capacity) : comm_(c), capacity_(capacity) {}
  size_t segment_bytes() const { return kHeaderBytes + capacity_; }
  uint64_t* sequence(int rank) const { return reinterpret_cast<uint64_t*>(bases_[size_t(rank)]); }
  uint64_t* input_offset(int rank) const { return sequence(rank) + 1; }
  uint64_t* done(int rank) const { return reinterpret_cast<uint64_t*>(bases_[size_t(rank)] + 64); }
  uint64_t* reduced(int rank) const {
    return reinterpret_cast<uint64_t*>(bases_[size_t(rank)] + 128);
  }
  const char* data(int rank) const { return bases_[size_t(rank)] + kHeaderBytes; }
  // True when [p, p + bytes) lies in this rank's allocated room.
  bool in_segment(const void* p, size_t bytes) const;
  // Publishes where this rank's input is, waits for every peer's; false when any is elsewhere.
  bool agree(const void* in, size_t bytes);
  // This rank has read every peer's input; returns once every peer has read this one's.
  void finish();

  Comm comm_;
  size_t capacity_ = 0;
  // allocate() and release() run on any thread (the last holder of a buffer releases it),
  // under allocation_; operations run on the group's and read used_ alone.
  std::mutex allocation_;
  std::atomic<size_t> used_{0};
  std::atomic<int64_t> live_{0};  // allocations not yet released
  std::vector<char*> bases_;      // every rank's segment, mapped here
  uint64_t ops_ = 0;              // operations this heap has agreed on
  uint64_t in_place_ops_ = 0;
  std::vector<uint64_t> peer_offsets_;
};

}  // namespace st
