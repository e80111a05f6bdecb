#include "launch/interrupt.hpp"

#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>

#include "core/liveness.hpp"

namespace st {
namespace {

// Two buffers: the handler reads the one `current` names while the other is rewritten.
constexpr size_t kLineBytes = 1024;
char g_lines[2][kLineBytes];
std::atomic<int> g_current{0};
volatile sig_atomic_t g_speaks = 0;

void write_line(int slot, const std::string& text) {
  const size_t n = std::min(text.size(), kLineBytes - 1);
  std::memcpy(g_lines[slot], text.data(), n);
  g_lines[slot][n] = '\0';
}

// Rewrites the line the handler prints; its callers (TrainingStateNote) serialize.
void note_training_state(int64_t step, int64_t max_steps, const std::string& checkpoint) {
  const int next = 1 - g_current.load();
  write_line(next, fmt::format("in step {} of {}; newest complete checkpoint: {}\n", step + 1,
                               max_steps, checkpoint.empty() ? std::string("none") : checkpoint));
  g_current.store(next);
}

// Every rank has the forwarded SIGUSR1/SIGUSR2. Should another rank end first, mpirun ends the
// job: SIGTERM to rank 0, SIGKILL one second later; a rank 0 that had not yet run its handler
// (descheduled on a loaded machine, in an uninterruptible write of a checkpoint) died without
// its line. So the other ranks stay until mpirun ends them once rank 0 has ended (the SIGTERM
// runs this handler again, nested, and exits), at most kSpeakerGraceS.
constexpr int kSpeakerGraceS = 5;

void wait_for_the_speaker() {
  timespec left{kSpeakerGraceS, 0};
  while (::nanosleep(&left, &left) != 0 && (left.tv_sec > 0 || left.tv_nsec > 0)) {
  }
}

extern "C" void on_interrupt(int sig) {
  // Under mpirun a SIGTERM may be mpirun ending the job for another rank that failed and said
  // why; its notice (sent through the heartbeat before its MPI_Abort) is here by then, and this
  // rank stays silent rather than print a contradictory line.
  // launch/shardrun passes Ctrl-C on as SIGUSR1 and SIGTERM as SIGUSR2 (see the header).
  const bool interrupted = sig == SIGINT || sig == SIGUSR1;
  if (g_speaks && !liveness::peer_failed()) {
    const char* prefix =
        interrupted ? "shardtrain: interrupted (SIGINT) " : "shardtrain: terminated (SIGTERM) ";
    const char* line = g_lines[g_current.load()];
    // One write: under mpirun, its own messages on the same stream could otherwise land in the
    // middle of the line.
    char whole[kLineBytes + 64];
    const size_t p = std::strlen(prefix), l = std::min(std::strlen(line), sizeof whole - p);
    std::memcpy(whole, prefix, p);
    std::memcpy(whole + p, line, l);
    (void)!::write(STDERR_FILENO, whole, p + l);
  } else if (!g_speaks && (sig == SIGUSR1 || sig == SIGUSR2)) {
    wait_for_the_speaker();
  }
  ::_exit(128 + (interrupted ? SIGINT : SIGTERM));
}

}  // namespace

void install_interrupt_handlers(bool speaks, bool under_mpirun) {
  g_speaks = speaks;
  write_line(0, "before the first step\n");
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGUSR1, &action, nullptr);
  sigaction(SIGUSR2, &action, nullptr);
  if (under_mpirun) action.sa_handler = SIG_IGN;
  sigaction(SIGINT, &action, nullptr);
}

TrainingStateNote::TrainingStateNote(bool speaks, int64_t max_steps, std::string newest)
    : speaks_(speaks), max_steps_(max_steps), newest_(std::move(newest)) {}

void TrainingStateNote::step(int64_t step) {
  std::lock_guard<std::mutex> lock(mutex_);
  step_ = step;
  if (speaks_) note_training_state(step_, max_steps_, newest_);
}

void TrainingStateNote::checkpoint_complete(const std::string& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  newest_ = path;
  if (speaks_) note_training_state(step_, max_steps_, newest_);
}

std::string TrainingStateNote::newest() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return newest_;
}

}  // namespace st
