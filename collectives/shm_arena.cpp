#include "collectives/shm_arena.hpp"

#include <algorithm>
#include <cstring>

#include "collectives/mpi_runtime.hpp"
#include "collectives/reduce_kernels.hpp"
#include "collectives/shm_sync.hpp"

namespace st {

ShmArena::~ShmArena() {
  if (win_ != MPI_WIN_NULL && mpi_is_initialized()) {
    MPI_Win_unlock_all(win_);
    MPI_Win_free(&win_);
  }
}

void ShmArena::reserve(size_t data_bytes) {
  if (data_bytes <= capacity_ && win_ != MPI_WIN_NULL) return;
  // Every rank asks for the same size at the same operation, so all of them get here.
  if (win_ != MPI_WIN_NULL) {
    check_mpi(MPI_Barrier(comm_.comm), "MPI_Barrier");  // peers done with the old window
    MPI_Win_unlock_all(win_);
    MPI_Win_free(&win_);
  }
  // Segments are contiguous (rank r's starts where rank r-1's ends), so each is a whole number
  // of cache lines: the next rank's header counters stay 8-byte aligned for atomic access
  // (UBSan found them misaligned at 3 ranks with an odd size) and on their own lines.
  const size_t capacity = (std::max<size_t>(data_bytes, size_t(1) << 20) + 63) / 64 * 64;
  char* base = nullptr;
  check_mpi(MPI_Win_allocate_shared(MPI_Aint(kHeaderBytes + capacity), 64, MPI_INFO_NULL,
                                    comm_.comm, &base, &win_),
            "MPI_Win_allocate_shared");
  check_mpi(MPI_Win_lock_all(MPI_MODE_NOCHECK, win_), "MPI_Win_lock_all");
  bases_.assign(size_t(comm_.size), nullptr);
  for (int r = 0; r < comm_.size; ++r) {
    MPI_Aint size = 0;
    int disp = 0;
    check_mpi(MPI_Win_shared_query(win_, r, &size, &disp, &bases_[size_t(r)]),
              "MPI_Win_shared_query");
  }
  std::memset(base, 0, kHeaderBytes);
  steps_done_ = 0;
  capacity_ = capacity;
  check_mpi(MPI_Win_sync(win_), "MPI_Win_sync");
  check_mpi(MPI_Barrier(comm_.comm), "MPI_Barrier");  // counters are zero everywhere
}

void ShmArena::wait_peers_consumed() {
  for (int r = 0; r < comm_.size; ++r)
    if (r != comm_.rank) spin_until([&] { return load_acquire(consumed(r)) >= steps_done_; });
}

void ShmArena::wait_published(int rank, uint64_t step) {
  spin_until([&] { return load_acquire(published(rank)) >= step; });
}

void ShmArena::all_gather(const void* in, void* out, size_t bytes) {
  reserve(bytes);
  wait_peers_consumed();
  const size_t blocks = (bytes + kBlockBytes - 1) / kBlockBytes;
  char* o = static_cast<char*>(out);
  const char* src = static_cast<const char*>(in);
  for (size_t b = 0; b < blocks; ++b) {
    const size_t off = b * kBlockBytes, len = std::min(kBlockBytes, bytes - off);
    std::memcpy(data(comm_.rank) + off, src + off, len);
    store_release(published(comm_.rank), steps_done_ + b + 1);
    char* mine = o + size_t(comm_.rank) * bytes;
    if (mine != src) std::memcpy(mine + off, src + off, len);  // while the block is in cache
    for (int k = 1; k < comm_.size; ++k) {
      const int r = (comm_.rank + k) % comm_.size;  // staggered, so peers read different slots
      wait_published(r, steps_done_ + b + 1);
      std::memcpy(o + size_t(r) * bytes + off, data(r) + off, len);
    }
    store_release(consumed(comm_.rank), steps_done_ + b + 1);
  }
  steps_done_ += blocks;
}

void ShmArena::reduce_scatter(const void* in, DType in_dtype, float* out, size_t n) {
  const size_t esize = dtype_size(in_dtype), chunk_bytes = n * esize;
  reserve(chunk_bytes * size_t(comm_.size));
  wait_peers_consumed();
  const char* src = static_cast<const char*>(in);
  const size_t block_elems = kBlockBytes / 4;
  const size_t blocks = (n + block_elems - 1) / block_elems;
  const size_t mine = size_t(comm_.rank) * chunk_bytes;
  for (size_t b = 0; b < blocks; ++b) {
    const size_t first = b * block_elems, count = std::min(block_elems, n - first);
    // Publish block b of every chunk the other ranks reduce; this rank's own is read in place.
    for (int r = 0; r < comm_.size; ++r)
      if (r != comm_.rank) {
        const size_t at = size_t(r) * chunk_bytes + first * esize;
        std::memcpy(data(comm_.rank) + at, src + at, count * esize);
      }
    store_release(published(comm_.rank), steps_done_ + b + 1);
    // Sum block b of this rank's chunk over the ranks, in rank order.
    float* acc = out + first;
    for (int r = 0; r < comm_.size; ++r) {
      const char* part =
          r == comm_.rank ? src + mine + first * esize : data(r) + mine + first * esize;
      if (r != comm_.rank) wait_published(r, steps_done_ + b + 1);
      if (r == 0)
        load_f32(acc, part, in_dtype, count);
      else
        add_into(acc, part, in_dtype, count);
    }
    store_release(consumed(comm_.rank), steps_done_ + b + 1);
  }
  steps_done_ += blocks;
}

}  // namespace st
