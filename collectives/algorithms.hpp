#pragma once
// Blocking collective algorithms over one communicator. They run on the communication thread.
#include <mpi.h>

#include <atomic>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.hpp"

namespace st {

struct Comm {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  // Set for an interruptible group: its waits poll, and end (an Error) once this is true.
  const std::atomic<bool>* interrupt = nullptr;
};

// Largest piece one MPI call moves; larger buffers go in several calls.
constexpr size_t kMaxPieceBytes = size_t(1) << 30;

MPI_Datatype mpi_type(DType dtype);

// out[size * bytes] = concat of every rank's in[bytes].
void mpi_all_gather(const Comm& c, const void* in, void* out, size_t bytes);
// MPI_Allreduce in place; on an oversubscribed machine its non-blocking form, waited for
// without spinning (see mpi_machine_oversubscribed).
void mpi_all_reduce(const Comm& c, void* data, int count, MPI_Datatype type, MPI_Op op);
// MPI_Barrier, or a polled MPI_Ibarrier (oversubscribed, or an interruptible group).
void mpi_barrier(const Comm& c);
// Chunk r (`chunk` bytes) of every rank's `in` goes to rank r: out[size * chunk].
void mpi_all_to_all(const Comm& c, const void* in, void* out, size_t chunk);
void ring_all_gather(const Comm& c, const void* in, void* out, size_t bytes);

// out[n] = sum over ranks of in[rank * n, +n); in is FP32 or BF16, the sum is FP32.
void mpi_reduce_scatter(const Comm& c, const void* in, DType in_dtype, float* out, size_t n);
void ring_reduce_scatter(const Comm& c, const void* in, DType in_dtype, float* out, size_t n);

}  // namespace st
