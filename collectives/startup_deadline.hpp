#pragma once
// A bound on a rank's start-up: MPI's own (MPI_Init_thread, the split of the world by node) and
// the ranks' first agreement. Open MPI can spin for good inside its start-up when many jobs
// start at once on one host (its issue 7642; seen once in this suite, 8 minutes in
// MPI_Comm_split_type); past the bound the rank names the stage it is stuck in and exits 1, so
// mpirun ends the job, instead of spinning until someone notices.
#include <string>

namespace st {

// The bound in seconds (training.startup_timeout; 0: none). Applies to the stage in progress
// from its start, and to later ones.
void set_startup_timeout(double seconds);
double startup_timeout();
// Who this rank is before MPI can say (the launcher's rank; 0 outside one), and the test
// seam's KEY@RANK ("" for none); the library's start-up sets them from the environment.
void set_startup_identity(int launcher_rank, const std::string& stall_stage);
// The stage this rank is in, `what` as the message names it ("MPI_Init_thread (Open MPI's
// start-up)"): the first call after startup_done (or ever) starts the clock; later ones only
// rename the stage. The test seam (SHARDTRAIN_TEST_STARTUP_STALL=KEY@RANK) stalls that rank at
// the start of stage `key` ("mpi_init", "node_split", "agreement") for an hour.
void startup_stage(const char* key, const std::string& what);
// The stage is over: the clock stops until the next startup_stage.
void startup_done();
// training.startup_timeout=S among `argv`'s words, if any is a number (the config check reports
// a bad one once MPI is up): what the bound is before any config file has been read.
void startup_timeout_from_arguments(int argc, char** argv);

}  // namespace st
