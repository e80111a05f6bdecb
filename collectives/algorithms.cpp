#include "collectives/algorithms.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/mpi_runtime.hpp"
#include "core/bf16.hpp"
#include "core/error.hpp"

namespace st {
namespace {

// Adds `n` elements of `src` (FP32 or BF16) into FP32 `acc`.
void add_into(float* acc, const void* src, DType dtype, size_t n) {
  if (dtype == DType::f32) {
    const float* s = static_cast<const float*>(src);
#pragma omp simd
    for (size_t i = 0; i < n; ++i) acc[i] += s[i];
  } else {
    const bf16* s = static_cast<const bf16*>(src);
#pragma omp simd
    for (size_t i = 0; i < n; ++i) acc[i] += bf16_to_f32(s[i]);
  }
}

void load_f32(float* dst, const void* src, DType dtype, size_t n) {
  if (dtype == DType::f32)
    std::memcpy(dst, src, n * 4);
  else
    convert_bf16_to_f32(static_cast<const bf16*>(src), dst, n);
}

void sendrecv_bytes(const Comm& c, const void* send, int to, void* recv, int from, size_t bytes) {
  for (size_t off = 0; off < bytes; off += kMaxPieceBytes) {
    const int len = int(std::min(kMaxPieceBytes, bytes - off));
    check_mpi(MPI_Sendrecv(static_cast<const char*>(send) + off, len, MPI_BYTE, to, 0,
                           static_cast<char*>(recv) + off, len, MPI_BYTE, from, 0, c.comm,
                           MPI_STATUS_IGNORE),
              "MPI_Sendrecv");
  }
}

}  // namespace

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return MPI_FLOAT;
    case DType::f64:
      return MPI_DOUBLE;
    case DType::bf16:
      return MPI_UINT16_T;  // MPI has no BF16: move the bits
    case DType::i32:
      return MPI_INT32_T;
  }
  return MPI_BYTE;
}

void mpi_all_gather(const Comm& c, const void* in, void* out, size_t bytes) {
  // Piece by piece; a resized datatype lands each rank's piece at its stride in `out`.
  for (size_t off = 0; off < std::max<size_t>(bytes, 1); off += kMaxPieceBytes) {
    const size_t len = std::min(kMaxPieceBytes, bytes - off);
    MPI_Datatype piece, strided;
    check_mpi(MPI_Type_contiguous(int(len), MPI_BYTE, &piece), "MPI_Type_contiguous");
    check_mpi(MPI_Type_create_resized(piece, 0, MPI_Aint(bytes), &strided),
              "MPI_Type_create_resized");
    check_mpi(MPI_Type_commit(&strided), "MPI_Type_commit");
    const char* src = static_cast<const char*>(in) + off;
    char* dst = static_cast<char*>(out) + off;
    const bool in_place = src == dst + size_t(c.rank) * bytes;
    const int rc =
        MPI_Allgather(in_place ? MPI_IN_PLACE : src, int(len), MPI_BYTE, dst, 1, strided, c.comm);
    MPI_Type_free(&strided);
    MPI_Type_free(&piece);
    check_mpi(rc, "MPI_Allgather");
    if (bytes == 0) break;
  }
}

void ring_all_gather(const Comm& c, const void* in, void* out, size_t bytes) {
  char* o = static_cast<char*>(out);
  if (o + size_t(c.rank) * bytes != in) std::memcpy(o + size_t(c.rank) * bytes, in, bytes);
  const int right = (c.rank + 1) % c.size, left = (c.rank - 1 + c.size) % c.size;
  // Step k: pass on the chunk received in step k-1 (first our own), receive the next.
  for (int k = 0; k < c.size - 1; ++k) {
    const int send_chunk = (c.rank - k + c.size) % c.size;
    const int recv_chunk = (c.rank - k - 1 + 2 * c.size) % c.size;
    sendrecv_bytes(c, o + size_t(send_chunk) * bytes, right, o + size_t(recv_chunk) * bytes, left,
                   bytes);
  }
}

void mpi_reduce_scatter(const Comm& c, const void* in, DType in_dtype, float* out, size_t n) {
  const size_t total = n * size_t(c.size);
  std::vector<float> widened;
  const float* src = static_cast<const float*>(in);
  if (in_dtype != DType::f32) {
    widened.resize(total);
    load_f32(widened.data(), in, in_dtype, total);
    src = widened.data();
  }
  const size_t max_elems = kMaxPieceBytes / 4;
  if (n <= max_elems) {
    check_mpi(MPI_Reduce_scatter_block(src, out, int(n), MPI_FLOAT, MPI_SUM, c.comm),
              "MPI_Reduce_scatter_block");
    return;
  }
  // More than fits one call: pack piece p of every rank's chunk together, reduce that.
  std::vector<float> packed;
  for (size_t off = 0; off < n; off += max_elems) {
    const size_t len = std::min(max_elems, n - off);
    packed.resize(len * size_t(c.size));
    for (int r = 0; r < c.size; ++r)
      std::memcpy(packed.data() + size_t(r) * len, src + size_t(r) * n + off, len * 4);
    check_mpi(
        MPI_Reduce_scatter_block(packed.data(), out + off, int(len), MPI_FLOAT, MPI_SUM, c.comm),
        "MPI_Reduce_scatter_block");
  }
}

void ring_reduce_scatter(const Comm& c, const void* in, DType in_dtype, float* out, size_t n) {
  const size_t esize = dtype_size(in_dtype);
  auto chunk = [&](int i) { return static_cast<const char*>(in) + size_t(i) * n * esize; };
  if (c.size == 1) return load_f32(out, chunk(0), in_dtype, n);
  const int right = (c.rank + 1) % c.size, left = (c.rank - 1 + c.size) % c.size;
  // Kept between calls: fresh 32 MiB buffers cost page faults on every operation.
  static thread_local std::vector<float> send, recv;
  if (send.size() < n) send.resize(n), recv.resize(n);
  // Step k sends the partial sum of chunk (rank-k-1) and receives that of chunk (rank-k-2),
  // adding this rank's contribution; after size-1 steps chunk `rank` is complete.
  load_f32(send.data(), chunk((c.rank - 1 + c.size) % c.size), in_dtype, n);
  for (int k = 0; k < c.size - 1; ++k) {
    const int recv_chunk = (c.rank - k - 2 + 2 * c.size) % c.size;
    sendrecv_bytes(c, send.data(), right, recv.data(), left, n * 4);
    float* acc = k == c.size - 2 ? out : send.data();
    if (acc != recv.data()) std::memcpy(acc, recv.data(), n * 4);
    add_into(acc, chunk(recv_chunk), in_dtype, n);
  }
}

ShmArena::~ShmArena() {
  if (win_ != MPI_WIN_NULL && mpi_is_initialized()) {
    MPI_Win_unlock_all(win_);
    MPI_Win_free(&win_);
  }
}

void ShmArena::reserve(size_t bytes_per_rank) {
  if (bytes_per_rank <= capacity_ && win_ != MPI_WIN_NULL) return;
  if (win_ != MPI_WIN_NULL) {
    MPI_Win_unlock_all(win_);
    MPI_Win_free(&win_);
  }
  const size_t capacity = std::max<size_t>(bytes_per_rank, 1 << 20);
  char* base = nullptr;
  check_mpi(MPI_Win_allocate_shared(MPI_Aint(capacity), 1, MPI_INFO_NULL, comm_.comm, &base, &win_),
            "MPI_Win_allocate_shared");
  check_mpi(MPI_Win_lock_all(MPI_MODE_NOCHECK, win_), "MPI_Win_lock_all");
  bases_.assign(size_t(comm_.size), nullptr);
  for (int r = 0; r < comm_.size; ++r) {
    MPI_Aint size = 0;
    int disp = 0;
    check_mpi(MPI_Win_shared_query(win_, r, &size, &disp, &bases_[size_t(r)]),
              "MPI_Win_shared_query");
  }
  capacity_ = capacity;
}

void ShmArena::fence() {
  check_mpi(MPI_Win_sync(win_), "MPI_Win_sync");
  check_mpi(MPI_Barrier(comm_.comm), "MPI_Barrier");
  check_mpi(MPI_Win_sync(win_), "MPI_Win_sync");
}

void ShmArena::all_gather(const void* in, void* out, size_t bytes) {
  reserve(bytes);
  std::memcpy(slot(comm_.rank), in, bytes);
  fence();
  for (int r = 0; r < comm_.size; ++r)
    if (r != comm_.rank || static_cast<char*>(out) + size_t(r) * bytes != in)
      std::memcpy(static_cast<char*>(out) + size_t(r) * bytes, slot(r), bytes);
  fence();  // nobody refills a slot before every rank has read it
}

void ShmArena::reduce_scatter(const void* in, DType in_dtype, float* out, size_t n, int threads) {
  const size_t esize = dtype_size(in_dtype);
  const size_t total_bytes = n * size_t(comm_.size) * esize;
  reserve(total_bytes);
  std::memcpy(slot(comm_.rank), in, total_bytes);
  fence();
  // This rank sums its chunk over every rank's slot, in rank order, split over `threads`.
  const size_t chunk_offset = size_t(comm_.rank) * n * esize;
  // Starting a thread team costs more than it saves below a few MiB.
  const int team = n * esize >= (size_t(4) << 20) ? std::max(1, threads) : 1;
#pragma omp parallel num_threads(team)
  {
    const size_t t = size_t(omp_get_thread_num()), nt = size_t(omp_get_num_threads());
    const size_t per = (n + nt - 1) / nt;
    const size_t begin = std::min(n, t * per), end = std::min(n, begin + per);
    if (end > begin) {
      load_f32(out + begin, slot(0) + chunk_offset + begin * esize, in_dtype, end - begin);
      for (int r = 1; r < comm_.size; ++r)
        add_into(out + begin, slot(r) + chunk_offset + begin * esize, in_dtype, end - begin);
    }
  }
  fence();
}

}  // namespace st
