#pragma once
// Which ranks this process trains with: the MPI world under mpirun, or a single in-process
// rank without it (the same sharded runtime at world size 1). Also how start-up errors reach
// the user as one message, however many ranks hit them.
#include <functional>
#include <memory>

#include "collectives/process_group.hpp"

namespace st {

// True when started by mpirun (or another launcher that sets a rank in the environment).
bool under_mpirun();

// The ranks of a run, for as long as it lasts: the context that start_ranks() returns owns the
// MPI runtime (unless the program had initialized MPI itself), and its destructor ends it
// (MPI_Finalize), so a program written as docs/library.md shows ends cleanly under mpirun.
// Destroyed while an exception unwinds, it leaves MPI and its group as they are (freeing and
// finalizing are collective: the other ranks may be elsewhere); the job then ends through the
// exception's handler, or through the terminate handler start_ranks() installs: that rank's
// message, and every rank ended with exit 2 (bad input) or 1.
struct RankContext {
  std::unique_ptr<ProcessGroup> group;
  bool mpi = false;
  int ranks_on_node = 1;
  int rank() const { return group->rank(); }
  int size() const { return group->size(); }

  RankContext() = default;
  RankContext(RankContext&& other) noexcept;
  RankContext& operator=(RankContext&& other) noexcept;
  RankContext(const RankContext&) = delete;
  RankContext& operator=(const RankContext&) = delete;
  ~RankContext();

 private:
  friend RankContext start_ranks();
  bool owns_mpi_ = false;  // this context started MPI and ends it
};

// Initializes MPI under mpirun (world group), else a one-rank in-process group. Installs a
// terminate handler that turns an exception nobody caught into one message and the job's end
// (exit 2 for an InputError, 1 otherwise) on every rank (a terminate without an exception goes
// to the handler installed before, or abort), then applies SHARDTRAIN_KERNELS.
RankContext start_ranks();

// SHARDTRAIN_KERNELS=portable forces the portable CPU kernels (the packed GEMM's portable
// micro-kernel, the portable BF16 conversion) in place of AVX2/AVX-512 ones, so that the whole
// suite can run on the paths a CPU without them would take; `avx2` caps the elementwise kernels
// at AVX2 and converts BF16 portably, as a CPU with AVX2 and no AVX-512 does; unset or `auto`:
// chosen by CPU. Anything else is an InputError naming the variable.
void apply_kernel_choice_from_environment();

// Sets this rank's OpenMP threads: `threads`, or (0) the cores divided among the ranks on this
// node, so ranks sharing a machine do not oversubscribe it. Returns the count.
int use_threads_per_rank(int threads, int ranks_on_node);

// Thrown on ranks that have nothing to add to an error another rank already reported.
struct ExitQuietly {
  int code;
};

// Runs `fn` (start-up work that must succeed on every rank), then agrees across the group on
// whether it did. On failure exactly one rank prints the error (rank 0 if it failed too, else
// the lowest failing rank, named), and every rank throws ExitQuietly with the exit code
// (2 for bad input, 1 otherwise), so no rank is left waiting in a collective.
void agree_on_startup(ProcessGroup& group, const std::function<void()>& fn);

// Runs a command's work after start-up. A failure on this rank alone while the others may be
// waiting for it in a collective ends the whole job at once, before any destructor waits on
// peers: this rank prints its message (naming itself) and MPI_Abort ends every rank, with
// exit code 2 for bad input, 1 otherwise. Without other ranks the exception goes on as usual.
int run_after_startup(const std::function<int()>& fn);

}  // namespace st
