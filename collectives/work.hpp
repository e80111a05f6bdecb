#pragma once
// Work: the handle of an asynchronous collective (c10d's contract): wait() blocks until it is
// done and rethrows its failure with context, keeping its kind (bad input stays bad input);
// is_completed() never blocks. Only the backend that runs an operation completes it
// (collectives/pending_work.hpp).
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>

namespace st {

class Work {
 public:
  explicit Work(std::string description) : description_(std::move(description)) {}
  virtual ~Work() = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  void wait();
  // Waits at most `timeout_s` seconds: true once done (a failure rethrown as by wait()), false
  // when the deadline passed first; the operation goes on (c10d's wait(timeout) raises there
  // instead). ProcessGroup::abort ends it.
  bool wait_for(double timeout_s);
  bool is_completed() const;
  const std::string& description() const { return description_; }
  // When the operation began running and when it finished (trace_now_us clock); for traces.
  double started_us() const;
  double completed_us() const;

 protected:
  // Called once by whoever runs the operation.
  void finish(std::exception_ptr error = nullptr);
  void mark_started();

 private:
  std::string description_;
  mutable std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  double started_us_ = 0, completed_us_ = 0;
  std::exception_ptr error_;
};

}  // namespace st
