#pragma once
// SIGINT and SIGTERM during training: the job stops at once, and rank 0 says in one line at
// which step it was and which complete checkpoint a rerun would resume from. The line is built
// ahead of time (a signal handler may only write it).
#include <cstdint>
#include <string>

namespace st {

// Installs the handlers; `speaks`: this process prints the line (rank 0). Under mpirun the
// ranks leave SIGINT to mpirun (launch/shardrun turns Ctrl-C into a SIGTERM that mpirun
// forwards to every rank while it keeps their output); a rank dying of SIGINT by itself would
// make mpirun drop the line.
void install_interrupt_handlers(bool speaks, bool under_mpirun);
// The state the line reports: training is in step `step` (0-based) of `max_steps`, and the
// newest complete checkpoint is `checkpoint` ("" for none).
void note_training_state(int64_t step, int64_t max_steps, const std::string& checkpoint);

}  // namespace st
