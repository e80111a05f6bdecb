#pragma once
// The MPI backend's own choice of how an all-gather or reduce-scatter moves its data: MPI's
// built-in, a ring of point-to-point steps, or a shared-memory window on one node; `automatic`
// lets the backend choose by operation, size and topology. A construction option of a group
// (GroupOptions, collectives/process_group.hpp) that only the MPI backend reads.
namespace st {

enum class Algorithm { automatic, mpi, ring, shm };

const char* algorithm_name(Algorithm a);

}  // namespace st
