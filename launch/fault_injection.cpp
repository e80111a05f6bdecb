#include "launch/fault_injection.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "launch/commands.hpp"
#include "launch/elastic.hpp"

namespace st {

FaultInjection::FaultInjection(const CommonOptions& options, int world_rank)
    : kill_after_(injected_kills_from_environment(world_rank)),
      hang_at_step_(options.test_hang_at_step),
      slow_checkpoint_ms_(options.test_slow_checkpoint_ms) {}

void FaultInjection::kill_if_due(int64_t step) const {
  // As a killed process dies: no handler runs, no message, no flush.
  if (std::find(kill_after_.begin(), kill_after_.end(), step) != kill_after_.end())
    ::kill(::getpid(), SIGKILL);
}

void FaultInjection::hang_if_due(int64_t step) const {
  if (step + 1 == hang_at_step_)
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

}  // namespace st
