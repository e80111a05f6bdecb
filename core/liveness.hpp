#pragma once
// What this process's main thread is doing, as the heartbeat (collectives/heartbeat) reports it
// to a peer: a progress counter bumped whenever work moves on (a collective submitted, a file
// read or written, a step begun), the training step, and whether it is waiting on other ranks.
// A peer that sees no heartbeat, or a rank that stays outside any wait without progress while
// others wait for it, can tell a stopped or stuck rank from a slow one. Lock-free and cheap.
#include <cstdint>

namespace st::liveness {

void note_progress();
void set_step(int64_t step);  // 0-based; -1 before training
// Steps complete (a failure record's step: a save after step 8 fails "after step 8").
void set_steps_done(int64_t steps);
int64_t steps_done();

// Marks the main thread as waiting on other ranks while alive (nests).
class WaitingScope {
 public:
  WaitingScope();
  ~WaitingScope();
  WaitingScope(const WaitingScope&) = delete;
  WaitingScope& operator=(const WaitingScope&) = delete;
};

struct Snapshot {
  uint64_t progress = 0;
  int64_t step = -1;
  bool waiting = false;
  double waiting_since_s = 0;  // steady-clock seconds when the current wait began
};
Snapshot snapshot();

// Set when another rank (`rank`) announced that it is ending the job with its own message:
// this rank's SIGTERM (from mpirun, carrying out that abort) is then no news to print, and
// neither is a failure of its own that the other one caused. When several ranks fail at once
// (all of them writing to one full disk), the lowest of them speaks.
void note_peer_failed(int rank);
bool peer_failed();  // async-signal-safe
bool peer_failed_below(int rank);
double now_s();  // the steady clock the snapshot uses

}  // namespace st::liveness
