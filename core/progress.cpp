#include "core/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>

namespace st {
namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

std::string format_duration(double seconds) {
  const int64_t t = int64_t(seconds + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, t / 60 % 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

Progress::Progress(std::string label, long total, bool enabled)
    : label_(std::move(label)),
      total_(total),
      enabled_(enabled),
      tty_(isatty(STDERR_FILENO) == 1),
      start_s_(now_s()) {}

Progress::~Progress() {
  if (enabled_ && open_) std::fputc('\n', stderr);
}

void Progress::update(long done, const std::string& what) {
  if (!enabled_) return;
  std::string line = label_;
  if (total_ > 0) {
    line += fmt::format(" {}/{}", done, total_);
    if (done > 0 && done < total_)
      line +=
          " | eta " + format_duration((now_s() - start_s_) / double(done) * double(total_ - done));
  }
  if (!what.empty()) line += " | " + what;
  if (tty_) {
    fmt::print(stderr, "\r\033[K{}", line);
    open_ = true;
  } else {
    fmt::print(stderr, "{}\n", line);
  }
  std::fflush(stderr);
}

void Progress::finish(const std::string& message) {
  if (!enabled_) return;
  if (tty_) fmt::print(stderr, "\r\033[K");
  fmt::print(stderr, "{} | {} ({})\n", label_, message, format_duration(now_s() - start_s_));
  open_ = false;
  std::fflush(stderr);
}

}  // namespace st
