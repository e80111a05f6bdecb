#pragma once
// Intra-node collectives through one shared-memory window (MPI_Win_allocate_shared).
// Each rank's slot starts with two counters, then data. The work is cut into blocks; a rank
// publishes block b (bumps `published`), peers wait for it, consume it (bump `consumed`), so
// copying and reducing overlap block by block and no barrier is needed between operations.
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collectives/algorithms.hpp"

namespace st {

class ShmArena {
 public:
  explicit ShmArena(const Comm& c) : comm_(c) {}
  ~ShmArena();
  ShmArena(const ShmArena&) = delete;
  ShmArena& operator=(const ShmArena&) = delete;

  // out[size * bytes] = concat of every rank's in[bytes].
  void all_gather(const void* in, void* out, size_t bytes);
  // out[n] = FP32 sum over ranks of in[rank * n, +n) (in is FP32 or BF16), in rank order.
  void reduce_scatter(const void* in, DType in_dtype, float* out, size_t n);

 private:
  static constexpr size_t kHeaderBytes = 128;  // published @0, consumed @64
  static constexpr size_t kBlockBytes = size_t(256) << 10;

  void reserve(size_t data_bytes_per_rank);  // collective when it grows
  char* data(int rank) const { return bases_[size_t(rank)] + kHeaderBytes; }
  uint64_t* published(int rank) const { return reinterpret_cast<uint64_t*>(bases_[size_t(rank)]); }
  uint64_t* consumed(int rank) const {
    return reinterpret_cast<uint64_t*>(bases_[size_t(rank)] + 64);
  }
  // Before overwriting this rank's slot: every peer has consumed everything before this op.
  void wait_peers_consumed();
  void wait_published(int rank, uint64_t step);

  Comm comm_;
  MPI_Win win_ = MPI_WIN_NULL;
  size_t capacity_ = 0;
  std::vector<char*> bases_;
  uint64_t steps_done_ = 0;  // blocks completed by every rank in earlier operations
};

}  // namespace st
