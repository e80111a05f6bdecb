#include "launch/fault_injection.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "launch/commands.hpp"
#include "launch/elastic.hpp"

namespace st {

FaultInjection::FaultInjection(const CommonOptions& options, int world_rank)
    : kill_after_(injected_kills_from_environment(world_rank)),
      hold_after_(injected_holds_from_environment()),
      hang_at_step_(options.test_hang_at_step),
      slow_checkpoint_ms_(options.test_slow_checkpoint_ms),
      world_rank_(world_rank) {}

void FaultInjection::kill_if_due(int64_t step) const {
  if (std::find(kill_after_.begin(), kill_after_.end(), step) == kill_after_.end()) return;
  // The launcher learns that the fault fired from this file, not from a race between its log
  // watcher and mpirun's exit (SHARDRUN_FAULT_FIRED: the folder it reads after the run).
  if (const char* dir = std::getenv("SHARDRUN_FAULT_FIRED"); dir && *dir) {
    const std::string marker = std::string(dir) + "/rank-" + std::to_string(world_rank_);
    const int fd = ::open(marker.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) ::close(fd);
  }
  // As a killed process dies: no handler runs, no message, no flush.
  ::kill(::getpid(), SIGKILL);
}

void FaultInjection::hold_if_due(int64_t step) const {
  if (std::find(hold_after_.begin(), hold_after_.end(), step) == hold_after_.end()) return;
  const char* dir = std::getenv("SHARDRUN_FAULT_FIRED");
  if (!dir || !*dir) return;
  const std::string released = std::string(dir) + "/released-" + std::to_string(step);
  for (int waited_ms = 0; waited_ms < 60000 && ::access(released.c_str(), F_OK) != 0;
       waited_ms += 10)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

void FaultInjection::hang_if_due(int64_t step, const std::function<std::string()>& newest) const {
  if (step + 1 != hang_at_step_) return;
  for (std::string said = "\n";; std::this_thread::sleep_for(std::chrono::milliseconds(20))) {
    const std::string now = newest();
    if (now == said) continue;
    said = now;
    fmt::print(stderr, "test: hanging before step {}; newest complete checkpoint: {}\n", step + 1,
               now.empty() ? "none" : now);
    std::fflush(stderr);
  }
}

}  // namespace st
