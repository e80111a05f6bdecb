#pragma once
// Per-process timeline recording for metrics.trace: named spans on a compute track and a
// communication track, in microseconds of one steady clock. Off (the default) costs one
// pointer test per would-be span.
#include <mutex>
#include <string>
#include <vector>

namespace st {

// Microseconds on the process's steady clock (the same clock for every thread).
double trace_now_us();

enum class TraceTrack : int { compute = 0, comm = 1 };

struct TraceSpan {
  std::string name;
  TraceTrack track;
  double begin_us, end_us;
};

class TraceRecorder {
 public:
  // The active recorder, or nullptr when tracing is off.
  static TraceRecorder* active();
  static void set_active(TraceRecorder* recorder);

  void add(std::string name, TraceTrack track, double begin_us, double end_us);
  std::vector<TraceSpan> take();

 private:
  std::mutex mutex_;
  std::vector<TraceSpan> spans_;
};

// Records [construction, destruction) as a compute span when tracing is on.
class TraceScope {
 public:
  explicit TraceScope(const char* name);
  TraceScope(std::string name, bool);
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  TraceRecorder* recorder_;
  std::string name_;
  double begin_ = 0;
};

}  // namespace st
