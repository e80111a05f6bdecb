#pragma once
// SIGINT and SIGTERM during training: the job stops at once, and rank 0 says in one line at
// which step it was and which complete checkpoint a rerun would resume from. The line is built
// ahead of time (a signal handler may only write it).
#include <cstdint>
#include <mutex>
#include <string>

namespace st {

// Installs the handlers; `speaks`: this process prints the line (rank 0). Under mpirun the
// ranks leave SIGINT to mpirun. launch/shardrun turns Ctrl-C into SIGUSR1 and SIGTERM into
// SIGUSR2, which mpirun forwards to every rank without killing any: each rank ends by itself,
// so mpirun reads its output to the end (when mpirun kills the ranks, with SIGTERM and a
// SIGKILL one second later, rank 0's line can be lost). On SIGUSR1/SIGUSR2 the other ranks
// wait up to 5 s for mpirun to end them after rank 0: should one of them end first, mpirun kills
// a rank 0 slow to take the signal before it said its line. SIGTERM itself (mpirun's own kill,
// a scheduler's) is handled too, at once.
// A SIGTERM from mpirun (or its daemon) itself, the parent process, is mpirun ending the job,
// as it does when another rank ended: rank 0 says "stopped by mpirun (SIGTERM)" then, not
// "terminated (SIGTERM)", which is kept for the user's or a scheduler's own SIGTERM.
void install_interrupt_handlers(bool speaks, bool under_mpirun);
// Under launch/shardrun, at the start of main: SIGUSR1 and SIGUSR2 (the user's Ctrl-C and
// SIGTERM, as shardrun passes them on) end the process at once, rank 0 (by Open MPI's
// OMPI_COMM_WORLD_RANK, set before MPI_Init) saying so; their default action would kill it
// during start-up ("exited on signal 12", exit 140). `training`: the line says "before the
// first step", as train's does until then. Elsewhere nothing changes.
void install_startup_interrupt_handlers(bool training);
// The state the line reports (training is in step N of max_steps; the newest complete
// checkpoint, "none" for none), as training changes it: the step from the training thread, a
// checkpoint from whichever thread makes it complete (a background save's writer, the moment its
// marker is durable, not when the training thread next looks), so the line names what is on disk.
class TrainingStateNote {
 public:
  // `speaks`: this rank's line is printed (rank 0); the others only keep the state.
  TrainingStateNote(bool speaks, int64_t max_steps, std::string newest);
  void step(int64_t step);
  void checkpoint_complete(const std::string& path);
  std::string newest() const;

 private:
  mutable std::mutex mutex_;
  const bool speaks_;
  const int64_t max_steps_;
  int64_t step_ = 0;
  std::string newest_;
};

}  // namespace st
