#include "core/trace.hpp"

#include <atomic>
#include <chrono>

namespace st {
namespace {
std::atomic<TraceRecorder*> g_active{nullptr};
}  // namespace

double trace_now_us() {
  using namespace std::chrono;
  return double(duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count()) / 1e3;
}

TraceRecorder* TraceRecorder::active() {
  return g_active.load(std::memory_order_relaxed);
}

void TraceRecorder::set_active(TraceRecorder* recorder) {
  g_active.store(recorder);
}

void TraceRecorder::add(std::string name, TraceTrack track, double begin_us, double end_us) {
  std::lock_guard lock(mutex_);
  spans_.push_back({std::move(name), track, begin_us, end_us});
}

std::vector<TraceSpan> TraceRecorder::take() {
  std::lock_guard lock(mutex_);
  return std::move(spans_);
}

TraceScope::TraceScope(const char* name) : recorder_(TraceRecorder::active()) {
  if (recorder_) {
    name_ = name;
    begin_ = trace_now_us();
  }
}

TraceScope::TraceScope(std::string name, bool) : recorder_(TraceRecorder::active()) {
  if (recorder_) {
    name_ = std::move(name);
    begin_ = trace_now_us();
  }
}

TraceScope::~TraceScope() {
  if (recorder_) recorder_->add(std::move(name_), TraceTrack::compute, begin_, trace_now_us());
}

}  // namespace st
