#include "collectives/algorithms.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <vector>

#include "collectives/mpi_runtime.hpp"
#include "collectives/reduce_kernels.hpp"
#include "core/bf16.hpp"
#include "core/error.hpp"

namespace st {
namespace {

// Waits for `requests` polling MPI, spinning briefly, then sleeping between polls: when ranks
// outnumber cores (emulated hosts on one machine) a spinning waiter would take the core from
// the very rank (or the kernel's TCP stack) it waits for. Measured at 4 ranks on 2 cores as 2
// emulated hosts behind 1 Gbit/s: a 4 KiB ring all-gather 20 ms -> 4 ms, 1 MiB 37 -> 8 ms.
// In an interruptible group (c.interrupt) the wait ends with an Error once the flag is set; its
// requests stay pending inside MPI (the group is not used again). Such a group does background
// work (a checkpoint's commit) whose latency nobody waits on, while every poll is CPU taken from
// training: its pause keeps doubling, up to 5 ms (measured at 2 ranks on 2 cores: a commit
// waiting for the other rank's writer cost its communication thread ~0.1 s of CPU per save at
// 200 µs).
void wait_polite(MPI_Request* requests, int count, const Comm& c) {
  int done = 0;
  long pause_ns = 20000;  // 20 µs, then 200 µs (then, in the background, doubling to 5 ms)
  for (int polls = 0;; ++polls) {
    check_mpi(MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE), "MPI_Testall");
    if (done) return;
    if (c.interrupt && c.interrupt->load()) fail("interrupted: the group was aborted");
    if (polls > 200) {
      if (polls > 2000) pause_ns = c.interrupt ? std::min(2 * pause_ns, 5000000L) : 200000;
      const timespec pause{0, pause_ns};
      nanosleep(&pause, nullptr);
    }
  }
}

void sendrecv_bytes(const Comm& c, const void* send, int to, void* recv, int from, size_t bytes) {
  const bool polite = mpi_machine_oversubscribed();
  for (size_t off = 0; off < bytes; off += kMaxPieceBytes) {
    const int len = int(std::min(kMaxPieceBytes, bytes - off));
    if (!polite) {  // a core each: spinning inside MPI is the fastest wait
      check_mpi(MPI_Sendrecv(static_cast<const char*>(send) + off, len, MPI_BYTE, to, 0,
                             static_cast<char*>(recv) + off, len, MPI_BYTE, from, 0, c.comm,
                             MPI_STATUS_IGNORE),
                "MPI_Sendrecv");
      continue;
    }
    MPI_Request requests[2];
    check_mpi(
        MPI_Irecv(static_cast<char*>(recv) + off, len, MPI_BYTE, from, 0, c.comm, &requests[0]),
        "MPI_Irecv");
    check_mpi(
        MPI_Isend(static_cast<const char*>(send) + off, len, MPI_BYTE, to, 0, c.comm, &requests[1]),
        "MPI_Isend");
    wait_polite(requests, 2, c);
  }
}

}  // namespace

void mpi_all_reduce(const Comm& c, void* data, int count, MPI_Datatype type, MPI_Op op) {
  if (!mpi_machine_oversubscribed() && !c.interrupt) {
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, data, count, type, op, c.comm), "MPI_Allreduce");
    return;
  }
  MPI_Request request;
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, data, count, type, op, c.comm, &request),
            "MPI_Iallreduce");
  wait_polite(&request, 1, c);
}

void mpi_barrier(const Comm& c) {
  if (!mpi_machine_oversubscribed() && !c.interrupt) {
    check_mpi(MPI_Barrier(c.comm), "MPI_Barrier");
    return;
  }
  MPI_Request request;
  check_mpi(MPI_Ibarrier(c.comm, &request), "MPI_Ibarrier");
  wait_polite(&request, 1, c);
}

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
    case DType::i64:
      return MPI_INT64_T;
    case DType::u64:
      return MPI_UINT64_T;
    case DType::u8:
      return MPI_BYTE;
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

void mpi_all_to_all(const Comm& c, const void* in, void* out, size_t chunk) {
  const char* i = static_cast<const char*>(in);
  char* o = static_cast<char*>(out);
  std::memcpy(o + size_t(c.rank) * chunk, i + size_t(c.rank) * chunk, chunk);
  // Pairwise exchange: at step k, send to rank + k and receive from rank - k (each rank sends
  // and receives once per step, so no link carries two chunks at once).
  for (int k = 1; k < c.size; ++k) {
    const int to = (c.rank + k) % c.size, from = (c.rank - k + c.size) % c.size;
    sendrecv_bytes(c, i + size_t(to) * chunk, to, o + size_t(from) * chunk, from, chunk);
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
  if (n == 0) return;  // nothing to reduce (and empty buffers may be null)
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

}  // namespace st
