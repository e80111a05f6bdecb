#include "collectives/work.hpp"

#include "core/error.hpp"

namespace st {

void Work::wait() {
  std::unique_lock lock(mutex_);
  done_cv_.wait(lock, [&] { return done_; });
  if (error_) {
    try {
      std::rethrow_exception(error_);
    } catch (const std::exception& e) {
      fail("{} failed: {}", description_, e.what());
    }
  }
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
  }
  done_cv_.notify_all();
}

}  // namespace st
