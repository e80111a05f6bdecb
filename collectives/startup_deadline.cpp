#include "collectives/startup_deadline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/failure_record.hpp"

namespace st {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kDefaultTimeoutS = 40;
// Ranks above 0 wait this much longer, so that when every rank is stuck, rank 0's message is
// the job's one message and mpirun has ended the others before they speak (0.5 s was too short
// for mpirun to end ranks still in MPI_Init: two messages).
constexpr double kLaterRanksS = 2;

// Never destroyed: the watchdog thread may still wait on it while the process exits.
struct Watch {
  std::mutex mutex;
  std::condition_variable changed;
  double timeout_s = kDefaultTimeoutS;
  bool armed = false;
  Clock::time_point since;
  std::string stage;
  bool thread_started = false;
  int rank = 0;             // as the launcher told it (MPI cannot yet)
  std::string stall_stage;  // the test seam's "KEY@RANK", or ""
};
Watch& watch() {
  static Watch* w = new Watch;
  return *w;
}

[[noreturn]] void end_stuck_rank(const std::string& stage, double timeout_s, int rank) {
  const std::string message = fmt::format(
      "start-up did not finish within {:g} s: still in {} (training.startup_timeout; Open "
      "MPI's start-up can hang when many jobs start at once on one host)",
      timeout_s, stage);
  record_failure(FailureClass::timeout, 0, message, rank);
  std::fflush(stdout);
  std::fprintf(stderr, "shardtrain: rank %d: %s\n", rank, message.c_str());
  std::fflush(stderr);
  std::_Exit(1);  // MPI may be what hangs: no MPI_Abort; mpirun ends the other ranks
}

void run_watchdog() {
  Watch& w = watch();
  std::unique_lock lock(w.mutex);
  const double stagger = w.rank > 0 ? kLaterRanksS : 0;
  for (;;) {
    if (!w.armed || w.timeout_s <= 0) {
      w.changed.wait(lock);
      continue;
    }
    const auto deadline = w.since + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(w.timeout_s + stagger));
    if (w.changed.wait_until(lock, deadline) == std::cv_status::timeout && w.armed &&
        Clock::now() >= deadline)
      end_stuck_rank(w.stage, w.timeout_s, w.rank);
  }
}

}  // namespace

void set_startup_timeout(double seconds) {
  Watch& w = watch();
  std::lock_guard lock(w.mutex);
  w.timeout_s = seconds;
  w.changed.notify_all();
}

double startup_timeout() {
  Watch& w = watch();
  std::lock_guard lock(w.mutex);
  return w.timeout_s;
}

void set_startup_identity(int launcher_rank, const std::string& stall_stage) {
  Watch& w = watch();
  std::lock_guard lock(w.mutex);
  w.rank = launcher_rank;
  w.stall_stage = stall_stage;
}

void startup_stage(const char* key, const std::string& what) {
  bool stall = false;
  {
    Watch& w = watch();
    std::lock_guard lock(w.mutex);
    stall = !w.stall_stage.empty() && w.stall_stage == fmt::format("{}@{}", key, w.rank);
    if (!w.armed) w.since = Clock::now();
    w.armed = true;
    w.stage = what;
    if (!w.thread_started) {
      std::thread(run_watchdog).detach();
      w.thread_started = true;
    }
    w.changed.notify_all();
  }
  if (stall) std::this_thread::sleep_for(std::chrono::hours(1));
}

void startup_done() {
  Watch& w = watch();
  std::lock_guard lock(w.mutex);
  w.armed = false;
  w.changed.notify_all();
}

void startup_timeout_from_arguments(int argc, char** argv) {
  constexpr const char* kKey = "training.startup_timeout=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], kKey, std::strlen(kKey)) != 0) continue;
    char* end = nullptr;
    const double s = std::strtod(argv[i] + std::strlen(kKey), &end);
    if (end && *end == '\0' && s >= 0 && s <= 86400) set_startup_timeout(s);
  }
}

}  // namespace st
