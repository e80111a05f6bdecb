#include "collectives/symmetric_heap.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "collectives/mpi_runtime.hpp"
#include "collectives/reduce_kernels.hpp"
#include "collectives/shm_sync.hpp"
#include "core/error.hpp"

namespace st {
namespace {

constexpr size_t kBlockBytes = size_t(256) << 10;  // reduced while in cache, as ShmArena does

// True on every rank when `ok` is true on every rank.
bool all_ok(const Comm& c, bool ok) {
  int mine = ok, all = 0;
  check_mpi(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_LAND, c.comm), "MPI_Allreduce");
  return all != 0;
}

// Maps the segment `name` of `bytes`, creating it when `room` > 0 (the free space it needs);
// nullptr and `error` set when it cannot.
char* map_segment(const std::string& name, size_t bytes, size_t room, std::string& error) {
  const bool create = room > 0;
  const int fd = shm_open(name.c_str(), create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR, 0600);
  if (fd < 0) {
    error = fmt::format("shm_open {}: {}", name, std::strerror(errno));
    return nullptr;
  }
  void* p = MAP_FAILED;
  // Pages are taken at first touch, so room unused costs nothing; the filesystem must have it
  // all now (another process filling it later would make a touch fail: posix_fallocate would
  // rule that out, but would also take every reserved page up front).
  struct statvfs fs {};
  if (create && fstatvfs(fd, &fs) == 0 && uint64_t(fs.f_bavail) * fs.f_frsize < room)
    error = fmt::format("the shared-memory filesystem has {} MiB free, {} MiB needed",
                        uint64_t(fs.f_bavail) * fs.f_frsize >> 20, room >> 20);
  else if (create && ftruncate(fd, off_t(bytes)) != 0)
    error = fmt::format("ftruncate {}: {}", name, std::strerror(errno));
  else if ((p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
    error = fmt::format("mmap {}: {}", name, std::strerror(errno));
  close(fd);
  return p == MAP_FAILED ? nullptr : static_cast<char*>(p);
}

}  // namespace

std::shared_ptr<SymmetricHeap> SymmetricHeap::create(const Comm& c, size_t bytes,
                                                     std::string* why) {
  // Every rank asks for the same bytes (ProcessGroup::reserve_symmetric's contract: each rank
  // decides alone whether the room it has is enough); the largest is taken as a safeguard.
  unsigned long long largest = bytes;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &largest, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, c.comm),
            "MPI_Allreduce");
  const size_t capacity = (size_t(largest) + 63) / 64 * 64;
  // A name unique on the node: the first rank's process id and how many heaps it has made.
  static std::atomic<uint64_t> made{0};
  char prefix[64] = {};
  if (c.rank == 0)
    fmt::format_to_n(prefix, sizeof prefix - 1, "/shardtrain-{}-{}", getpid(), made++);
  check_mpi(MPI_Bcast(prefix, sizeof prefix, MPI_CHAR, 0, c.comm), "MPI_Bcast");
  auto name = [&](int r) { return fmt::format("{}-{}", prefix, r); };

  std::shared_ptr<SymmetricHeap> heap(new SymmetricHeap(c, capacity));
  heap->bases_.assign(size_t(c.size), nullptr);
  std::string error;
  // Room for every rank's segment: all of them may be touched.
  char* own = map_segment(name(c.rank), heap->segment_bytes(),
                          heap->segment_bytes() * size_t(c.size), error);
  heap->bases_[size_t(c.rank)] = own;
  bool ok = all_ok(c, own != nullptr);
  for (int r = 0; ok && r < c.size; ++r)
    if (r != c.rank &&
        !(heap->bases_[size_t(r)] = map_segment(name(r), heap->segment_bytes(), 0, error)))
      break;
  ok = ok && all_ok(c, std::all_of(heap->bases_.begin(), heap->bases_.end(),
                                   [](char* b) { return b != nullptr; }));
  // Every rank has mapped every segment (or given up): the names are no longer needed, so a
  // crash leaves nothing behind in /dev/shm.
  check_mpi(MPI_Barrier(c.comm), "MPI_Barrier");
  shm_unlink(name(c.rank).c_str());
  if (!ok) {
    if (why) *why = error.empty() ? "a peer could not map its segment" : error;
    return nullptr;
  }
  return heap;
}

SymmetricHeap::~SymmetricHeap() {
  for (char* base : bases_)
    if (base) munmap(base, segment_bytes());
}

void* SymmetricHeap::allocate(size_t bytes) {
  const std::lock_guard lock(allocation_);
  const size_t rounded = (bytes + 63) / 64 * 64, used = used_.load();
  if (rounded > capacity_ - used) return nullptr;
  used_.store(used + rounded);
  live_ += 1;
  return bases_[size_t(comm_.rank)] + kHeaderBytes + used;
}

void SymmetricHeap::release() {
  const std::lock_guard lock(allocation_);
  if (--live_ > 0) return;
  // Nothing of this rank's is in use (peers read a buffer only during an operation, which has
  // completed): its pages go back to the system, so a smaller set of buffers later costs only
  // what it touches.
  const size_t used = used_.exchange(0);
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  char* base = bases_[size_t(comm_.rank)];
  const size_t first = (kHeaderBytes + page - 1) / page * page;  // the header's page stays
  const size_t end = std::min((kHeaderBytes + used + page - 1) / page * page, segment_bytes());
  if (end > first) madvise(base + first, end - first, MADV_REMOVE);
}

bool SymmetricHeap::in_segment(const void* p, size_t bytes) const {
  const char* mine = data(comm_.rank);
  const char* q = static_cast<const char*>(p);
  const size_t used = used_.load();
  return q >= mine && bytes <= used && size_t(q - mine) <= used - bytes;
}

bool SymmetricHeap::agree(const void* in, size_t bytes) {
  const bool here = in_segment(in, bytes);
  const uint64_t op = ++ops_;
  *input_offset(comm_.rank) =
      here ? uint64_t(static_cast<const char*>(in) - data(comm_.rank)) : kNotHere;
  store_release(sequence(comm_.rank), op);
  peer_offsets_.assign(size_t(comm_.size), kNotHere);
  bool all_here = true;
  for (int r = 0; r < comm_.size; ++r) {
    spin_until([&] { return load_acquire(sequence(r)) >= op; });
    // A peer cannot publish its next operation before this rank has read this one: the
    // operation between (heap or staged) needs this rank's data.
    ST_CHECK(load_acquire(sequence(r)) == op, "symmetric heap: rank {} is at operation {}, not {}",
             r, load_acquire(sequence(r)), op);
    peer_offsets_[size_t(r)] = *input_offset(r);
    all_here = all_here && peer_offsets_[size_t(r)] != kNotHere;
  }
  return all_here;
}

void SymmetricHeap::finish() {
  store_release(done(comm_.rank), ops_);
  for (int r = 0; r < comm_.size; ++r)
    if (r != comm_.rank) spin_until([&] { return load_acquire(done(r)) >= ops_; });
  ++in_place_ops_;
}

bool SymmetricHeap::all_gather(const void* in, void* out, size_t bytes) {
  // Nothing to move (the same on every rank): the staged path, which does not wait on peers
  // then, so nothing is published that a slower peer could still be reading.
  if (bytes == 0) return false;
  char* o = static_cast<char*>(out);
  const void* source = in;
  if (!in_segment(in, bytes) && in_segment(out, bytes * size_t(comm_.size))) {
    // Published only after the copy, so peers read this rank's part from its output's slot.
    // Should the operation stage after all, it reads `in`, which the copy left as it was.
    source = o + size_t(comm_.rank) * bytes;
    if (source != in) std::memmove(o + size_t(comm_.rank) * bytes, in, bytes);
  }
  if (!agree(source, bytes)) return false;
  for (int k = 0; k < comm_.size; ++k) {
    const int r = (comm_.rank + k) % comm_.size;  // staggered, so peers read different segments
    const char* src = data(r) + peer_offsets_[size_t(r)];
    char* dst = o + size_t(r) * bytes;
    if (dst != src) std::memcpy(dst, src, bytes);
  }
  finish();
  return true;
}

bool SymmetricHeap::reduce_scatter(const void* in, DType in_dtype, float* out, size_t n) {
  const size_t esize = dtype_size(in_dtype);
  if (n == 0 || !agree(in, n * esize * size_t(comm_.size))) return false;
  const size_t mine = size_t(comm_.rank) * n * esize;
  const size_t block = kBlockBytes / 4;
  for (size_t first = 0; first < n; first += block) {
    const size_t count = std::min(block, n - first);
    for (int r = 0; r < comm_.size; ++r) {  // rank order: the same sums as every other path
      const char* part = data(r) + peer_offsets_[size_t(r)] + mine + first * esize;
      if (r == 0)
        load_f32(out + first, part, in_dtype, count);
      else
        add_into(out + first, part, in_dtype, count);
    }
  }
  finish();
  return true;
}

bool SymmetricHeap::all_reduce(float* data_, size_t n) {
  if (n == 0 || !agree(data_, n * sizeof(float))) return false;
  // Rank r owns elements [r·n/size, (r+1)·n/size): it sums them over every rank's buffer into
  // a scratch block first (its own buffer is one of the addends), then writes them back.
  const size_t size = size_t(comm_.size), rank = size_t(comm_.rank);
  auto begin = [&](size_t r) { return r * n / size; };
  auto buffer = [&](int r) {
    return reinterpret_cast<const float*>(data(r) + peer_offsets_[size_t(r)]);
  };
  const size_t block = kBlockBytes / 4;
  thread_local std::vector<float> scratch;
  scratch.resize(block);
  for (size_t first = begin(rank); first < begin(rank + 1); first += block) {
    const size_t count = std::min(block, begin(rank + 1) - first);
    for (int r = 0; r < comm_.size; ++r)  // rank order, as every other path sums
      if (r == 0)
        std::memcpy(scratch.data(), buffer(r) + first, count * sizeof(float));
      else
        add_into(scratch.data(), buffer(r) + first, DType::f32, count);
    std::memcpy(data_ + first, scratch.data(), count * sizeof(float));
  }
  // Every owner's sums are in place before any rank copies them.
  store_release(reduced(comm_.rank), ops_);
  for (int k = 1; k < comm_.size; ++k) {
    const int r = int((rank + size_t(k)) % size);
    spin_until([&] { return load_acquire(reduced(r)) >= ops_; });
    std::memcpy(data_ + begin(size_t(r)), buffer(r) + begin(size_t(r)),
                (begin(size_t(r) + 1) - begin(size_t(r))) * sizeof(float));
  }
  finish();
  return true;
}

}  // namespace st
