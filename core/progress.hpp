#pragma once
// A progress line on stderr: rewritten in place on a terminal, one plain line per update when
// stderr is a file or pipe (logs stay readable). Silent when disabled (e.g. on ranks > 0).
#include <string>

namespace st {

class Progress {
 public:
  // `label` prefixes every update; `total` units of work (0: no fraction or ETA).
  Progress(std::string label, long total, bool enabled = true);
  ~Progress();
  // `done` units finished; `what` describes the current unit. Prints the fraction and an ETA.
  void update(long done, const std::string& what = "");
  // Ends the line with a final message.
  void finish(const std::string& message);

 private:
  std::string label_;
  long total_;
  bool enabled_, tty_, open_ = false;
  double start_s_;
};

// "1h02m", "3m05s", "42s".
std::string format_duration(double seconds);

}  // namespace st
