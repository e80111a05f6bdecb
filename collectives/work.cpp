#include "collectives/work.hpp"

#include <algorithm>
#include <chrono>

#include "core/trace.hpp"

#include "core/error.hpp"
#include "core/liveness.hpp"

namespace st {

void Work::wait() {
  const liveness::WaitingScope waiting;  // on the other ranks, as far as the heartbeat can tell
  std::unique_lock lock(mutex_);
  done_cv_.wait(lock, [&] { return done_; });
  if (error_) {
    try {
      std::rethrow_exception(error_);
    } catch (const InputError& e) {
      fail_input("{} failed: {}", description_, e.what());
    } catch (const std::exception& e) {
      fail("{} failed: {}", description_, e.what());
    }
  }
}

bool Work::wait_for(double timeout_s) {
  {
    const liveness::WaitingScope waiting;
    std::unique_lock lock(mutex_);
    if (!done_cv_.wait_for(lock, std::chrono::duration<double>(std::max(0.0, timeout_s)),
                           [&] { return done_; }))
      return false;
  }
  wait();  // done: rethrows a failure with context
  return true;
}

bool Work::is_completed() const {
  std::lock_guard lock(mutex_);
  return done_;
}

void Work::finish(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
    error_ = std::move(error);
    completed_us_ = trace_now_us();
    if (started_us_ == 0) started_us_ = completed_us_;
  }
  done_cv_.notify_all();
}

void Work::mark_started() {
  std::lock_guard lock(mutex_);
  started_us_ = trace_now_us();
}

double Work::started_us() const {
  std::lock_guard lock(mutex_);
  return started_us_;
}

double Work::completed_us() const {
  std::lock_guard lock(mutex_);
  return completed_us_;
}

}  // namespace st
