#include "launch/interrupt.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "core/liveness.hpp"

namespace st {
namespace {

// Two buffers: the handler reads the one `current` names while the other is rewritten.
constexpr size_t kLineBytes = 1024;
char g_lines[2][kLineBytes];
std::atomic<int> g_current{0};
volatile sig_atomic_t g_speaks = 0;
// The process that started this rank when it is mpirun or Open MPI's daemon (else 0): its
// SIGTERM ends the job, as after another rank ended, not the user's signal.
volatile pid_t g_launcher = 0;

// Rewrites the line the handler prints (after the signal's words); its callers serialize
// (TrainingStateNote; the installs, before there is one).
void set_line(const std::string& text) {
  const int next = 1 - g_current.load();
  const size_t n = std::min(text.size(), kLineBytes - 1);
  std::memcpy(g_lines[next], text.data(), n);
  g_lines[next][n] = '\0';
  g_current.store(next);
}

void note_training_state(int64_t step, int64_t max_steps, const std::string& checkpoint) {
  set_line(fmt::format(" in step {} of {}; newest complete checkpoint: {}\n", step + 1, max_steps,
                       checkpoint.empty() ? std::string("none") : checkpoint));
}

// The parent process if it is Open MPI's launcher (mpirun, its daemon orted), else 0.
pid_t open_mpi_launcher() {
  const pid_t parent = ::getppid();
  char name[64] = {};
  const int fd = ::open(fmt::format("/proc/{}/comm", parent).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  const ssize_t n = ::read(fd, name, sizeof name - 1);
  ::close(fd);
  const std::string_view comm(name, n > 0 ? size_t(n) : 0);
  for (std::string_view launcher : {"mpirun\n", "orterun\n", "mpiexec\n", "orted\n"})
    if (comm == launcher) return parent;
  return 0;
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

extern "C" void on_interrupt(int sig, siginfo_t* info, void*) {
  // Under mpirun a SIGTERM may be mpirun ending the job for another rank that failed and said
  // why; its notice (sent through the heartbeat before its MPI_Abort) is here by then, and this
  // rank stays silent rather than print a contradictory line. A rank killed (SIGKILL) sends no
  // notice: the line then says that mpirun stopped this rank (its note naming the dead rank
  // follows), not that someone sent the user's SIGTERM.
  // launch/shardrun passes Ctrl-C on as SIGUSR1 and SIGTERM as SIGUSR2 (see the header).
  const bool interrupted = sig == SIGINT || sig == SIGUSR1;
  const bool by_launcher = sig == SIGTERM && g_launcher != 0 && info && info->si_pid == g_launcher;
  if (g_speaks && !liveness::peer_failed()) {
    const char* prefix = interrupted   ? "shardtrain: interrupted (SIGINT)"
                         : by_launcher ? "shardtrain: stopped by mpirun (SIGTERM)"
                                       : "shardtrain: terminated (SIGTERM)";
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

struct sigaction handler_action() {
  struct sigaction action {};
  action.sa_sigaction = on_interrupt;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  return action;
}

}  // namespace

void install_startup_interrupt_handlers(bool training) {
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (!std::getenv("SHARDRUN_JOB") || !rank) return;
  g_speaks = std::string_view(rank) == "0";
  set_line(training ? " before the first step\n" : "\n");
  const struct sigaction action = handler_action();
  sigaction(SIGUSR1, &action, nullptr);
  sigaction(SIGUSR2, &action, nullptr);
}

void install_interrupt_handlers(bool speaks, bool under_mpirun) {
  g_speaks = speaks;
  if (under_mpirun) g_launcher = open_mpi_launcher();
  set_line(" before the first step\n");
  struct sigaction action = handler_action();
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGUSR1, &action, nullptr);
  sigaction(SIGUSR2, &action, nullptr);
  if (under_mpirun) {
    action.sa_handler = SIG_IGN;
    action.sa_flags = 0;
  }
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
