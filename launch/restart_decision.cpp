#include "launch/restart_decision.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <regex>
#include <sstream>

#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/json_parse.hpp"

namespace st {
namespace {

// The text of the regular file `path` that `flag` names; nullopt when it does not exist and
// `may_be_missing`. Anything else is refused: opening a FIFO would wait for a writer, and the
// launcher with it, between two runs (O_NONBLOCK returns at once; fstat says what it is).
std::optional<std::string> read_regular(const char* flag, const std::string& path,
                                        bool may_be_missing) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT && may_be_missing) return std::nullopt;
    fail_input("restart-decision: {} '{}' cannot be read: {}", flag, path, std::strerror(errno));
  }
  struct stat st {};
  std::string text;
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  char buffer[65536];
  ssize_t n = 0;
  while (regular && (n = ::read(fd, buffer, sizeof buffer)) > 0) text.append(buffer, size_t(n));
  const int error = errno;
  ::close(fd);
  if (!regular)
    fail_input("restart-decision: {} '{}' is {}; it must be a regular file", flag, path,
               file_type_name(st.st_mode));
  if (n < 0)
    fail_input("restart-decision: {} '{}' cannot be read: {}", flag, path, std::strerror(error));
  return text;
}

// The ranks' records are regular files: one that is not (a FIFO) would hang their reader.
void check_records_folder(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) return;  // no rank wrote a record
    fail_input("restart-decision: --failures '{}' cannot be read: {}", dir, std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode))
    fail_input("restart-decision: --failures '{}' is {}; it must be a folder", dir,
               file_type_name(st.st_mode));
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string path = entry.path().string(), name = entry.path().filename().string();
    if (name.rfind("rank-", 0) != 0 || entry.path().extension() != ".json") continue;
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      fail_input(
          "restart-decision: --failures: '{}' is {}; a rank's failure record must be a "
          "regular file",
          path, file_type_name(st.st_mode));
  }
}

// Errors of the machine, not of the moment: a restart meets them again.
bool deterministic_io(int error) {
  return error == ENOSPC || error == EDQUOT || error == EFBIG || error == EACCES ||
         error == EPERM || error == EROFS;
}

// Steps beyond any training run (a step a millisecond for 30 years): a count above is a damaged
// record or line, and the launcher's and the restart line's step arithmetic stays far from
// overflow.
constexpr int64_t kMaxStepsDone = 1'000'000'000'000;

void check_steps_done(int64_t steps, const std::string& where) {
  if (steps < 0 || steps > kMaxStepsDone)
    fail_input("restart-decision: {}: steps_done = {} must be in [0, {}]", where, steps,
               kMaxStepsDone);
}

// rank 0's line when a signal ends it (launch/interrupt.cpp): the cause is elsewhere.
bool signal_line(const std::string& line) {
  for (const char* prefix :
       {"shardtrain: interrupted ", "shardtrain: terminated ", "shardtrain: stopped by mpirun "})
    if (line.rfind(prefix, 0) == 0) return true;
  return false;
}

// The cause when no rank left a record, from the output (the launcher's old rules).
RunFailure from_output(int exit_code, const std::string& log) {
  RunFailure f;
  f.exit_code = exit_code;
  f.kind = exit_code == 2 ? FailureClass::bad_input : FailureClass::other;
  std::istringstream in(read_regular("--log", log, true).value_or(""));
  std::string line, first_message, death;
  static const std::regex step_line(R"(^step +([0-9]+)/)");
  static const std::regex died(
      R"(process rank ([0-9]+) with PID [0-9]+ on node ([^ ]+) (exited on signal [0-9]+ \([^)]*\)))");
  std::smatch m;
  for (int number = 1; std::getline(in, line); ++number) {
    if (std::regex_search(line, m, step_line)) {
      const std::string digits = m[1].str(), where = fmt::format("--log '{}' line {}", log, number);
      if (digits.size() > 13)  // more than kMaxStepsDone, and perhaps than int64_t
        fail_input("restart-decision: {}: steps_done = {} must be in [0, {}]", where,
                   printable(digits), kMaxStepsDone);
      f.steps_done = std::stoll(digits);
      check_steps_done(f.steps_done, where);
    }
    if (first_message.empty() && line.rfind("shardtrain: ", 0) == 0 && !signal_line(line))
      first_message = line.substr(12);
    if (death.empty() && std::regex_search(line, m, died))
      death = fmt::format("rank {} on {} {}", m[1].str(), m[2].str(), m[3].str());
  }
  if (!first_message.empty()) {
    f.why = first_message;
  } else if (!death.empty()) {
    f.why = death;
    f.kind = FailureClass::lost_rank;
  } else {
    f.why = fmt::format("the job exited with code {}", exit_code);
  }
  return f;
}

}  // namespace

RunFailure run_failure(int exit_code, const std::string& failures_dir, const std::string& log) {
  check_records_folder(failures_dir);
  const auto records = read_failure_records(failures_dir);
  if (records.empty()) return from_output(exit_code, log);
  for (const FailureRecord& r : records)
    check_steps_done(r.steps_done,
                     fmt::format("--failures '{}': rank {}'s record", failures_dir, r.rank));
  // A rank cut off from the others (its host's link down) blames them in a record the launcher
  // never heard: the oldest record whose message reached the output is the cause, when any did.
  const std::string output = read_regular("--log", log, true).value_or("");
  const auto heard = std::find_if(records.begin(), records.end(), [&](const FailureRecord& r) {
    return output.find(fmt::format("shardtrain: rank {}: {}", r.rank, r.message)) !=
           std::string::npos;
  });
  const FailureRecord& cause = heard != records.end() ? *heard : records.front();
  RunFailure f;
  f.exit_code = exit_code;
  f.kind = cause.kind;
  f.error = cause.error;
  f.steps_done = cause.steps_done;
  f.why = fmt::format("rank {}: {}", cause.rank, cause.message);
  return f;
}

RestartDecision decide_restart(const RunFailure& now, const std::optional<RunFailure>& before,
                               const RestartLimits& limits) {
  const auto stop = [](std::string message) {
    RestartDecision d;
    d.message = std::move(message);
    return d;
  };
  if (now.exit_code == 2 || now.kind == FailureClass::bad_input)
    return stop(
        "shardrun: not restarting: the job refused its input (exit 2), which no restart can fix");
  if (now.kind == FailureClass::io && deterministic_io(now.error))
    return stop(fmt::format(
        "shardrun: not restarting: {} ({}) fails again on a restart; the failure, after step {}: "
        "{}",
        std::strerror(now.error),
        now.error == ENOSPC || now.error == EDQUOT || now.error == EFBIG
            ? "free space first"
            : "fix the permission first",
        now.steps_done, now.why));
  if (limits.attempt >= limits.max_restarts)
    return stop(fmt::format(
        "shardrun: not restarting: the {} restart(s) of --max-restarts are used; the last "
        "failure, after step {}: {}",
        limits.max_restarts, now.steps_done, now.why));
  if (before && before->kind == now.kind && before->error == now.error &&
      before->steps_done == now.steps_done)
    return stop(fmt::format(
        "shardrun: not restarting: the job failed the same way after step {} twice:\n  run {}: "
        "{}\n  run {}: {}",
        now.steps_done, limits.attempt, before->why, limits.attempt + 1, now.why));
  if (limits.available < limits.min_ranks)
    return stop(fmt::format(
        "shardrun: not restarting: {} rank(s) remain, fewer than --min-ranks {}; the failure, "
        "after step {}: {}",
        limits.available, limits.min_ranks, now.steps_done, now.why));
  RestartDecision d{true, "", limits.available, ""};
  if (limits.runnable.empty()) return d;
  const auto above =
      std::upper_bound(limits.runnable.begin(), limits.runnable.end(), limits.available);
  d.world = above == limits.runnable.begin() ? 0 : *std::prev(above);
  if (d.world == limits.available) return d;
  const auto why = limits.refused_why.find(limits.available);
  const std::string cannot =
      fmt::format("this job cannot run at {}{}", limits.available,
                  why == limits.refused_why.end() ? "" : " (" + why->second + ")");
  if (d.world < limits.min_ranks)
    return stop(fmt::format(
        "shardrun: not restarting: {} rank(s) remain, {}, and no world size from --min-ranks {} "
        "to {} can run it; the failure, after step {}: {}",
        limits.available, cannot, limits.min_ranks, limits.available, now.steps_done, now.why));
  d.note = fmt::format(
      "shardrun: {} ranks remain, but {}: the restart runs at {}, the largest "
      "world size it can",
      limits.available, cannot, d.world);
  return d;
}

void read_runnable_world_sizes(const std::string& path, RestartLimits& limits) {
  const std::optional<std::string> read = read_regular("--world-sizes", path, true);
  if (!read) return;
  const std::string& text = *read;
  const std::string where = fmt::format("'{}'", path);
  const nlohmann::json j = parse_json_object(text, where);
  const int64_t world = json_int_at(j, "world_size", where, 1, 1 << 20);
  if (!j.contains("runnable") || !j.contains("refused") || !j["refused"].is_object())
    fail_input("{}: runnable (an array) and refused (an object) are required", where);
  limits.runnable.clear();
  for (int64_t w : json_int_array(j["runnable"], where + ": runnable", 1, world))
    limits.runnable.push_back(int(w));
  if (!std::is_sorted(limits.runnable.begin(), limits.runnable.end()))
    fail_input("{}: runnable must be ascending", where);
  limits.refused_why.clear();
  for (const auto& [key, why] : j["refused"].items()) {
    const int64_t w =
        json_int(nlohmann::json::parse(key, nullptr, false), where + ": refused key", 1, world);
    if (!why.is_string()) fail_input("{}: refused[{}] must be a string", where, key);
    limits.refused_why[int(w)] = why.get<std::string>();
  }
}

std::string run_failure_line(const RunFailure& f) {
  return nlohmann::json{{"exit_code", f.exit_code},
                        {"class", failure_class_name(f.kind)},
                        {"errno", f.error},
                        {"steps_done", f.steps_done},
                        {"why", f.why}}
      .dump();
}

RunFailure run_failure_from_line(const std::string& line, const std::string& where) {
  const nlohmann::json j = parse_json_object(line, where);
  if (!j.contains("class") || !j["class"].is_string() || !j.contains("why") ||
      !j["why"].is_string())
    fail_input("{}: class and why must be strings", where);
  RunFailure f;
  f.exit_code = int(json_int_at(j, "exit_code", where, 0, 255));
  f.kind = parse_failure_class(j["class"].get<std::string>(), where);
  f.error = int(json_int_at(j, "errno", where, 0, 4095));
  f.steps_done = json_int_at(j, "steps_done", where, 0, kMaxStepsDone);
  f.why = j["why"].get<std::string>();
  return f;
}

namespace {

void check_flag(const char* flag, int64_t value, int64_t lo, int64_t hi, const char* what) {
  if (value < lo || value > hi)
    fail_input("restart-decision: {} = {} must be in [{}, {}] ({})", flag, value, lo, hi, what);
}

// The flags as shardrun passes them; anything else is a caller's mistake, refused by name.
void check_options(const RestartDecisionOptions& o) {
  check_flag("--exit-code", o.exit_code, 1, 255, "a failed run's exit code; 0 is a success");
  check_flag("--attempt", o.limits.attempt, 0, 1000, "restarts so far");
  check_flag("--max-restarts", o.limits.max_restarts, 0, 1000, "shardrun --max-restarts");
  check_flag("--available", o.limits.available, 0, 65536, "ranks a restart can have");
  check_flag("--min-ranks", o.limits.min_ranks, 1, 65536, "shardrun --min-ranks");
}

// This run's line, for the next failure to compare with: without it, the same failure twice
// would go unnoticed, so a --save that cannot be written is refused before any decision.
void save_line(const std::string& path, const std::string& line) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0)
    fail_input("restart-decision: --save '{}' cannot be written: {}", path, std::strerror(errno));
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  const std::string text = line + "\n";
  const bool written = regular && ::write(fd, text.data(), text.size()) == ssize_t(text.size());
  const int error = errno;
  const bool closed = ::close(fd) == 0;
  if (!regular)
    fail_input("restart-decision: --save '{}' is {}; it must be a regular file", path,
               file_type_name(st.st_mode));
  if (!written || !closed)
    fail_input("restart-decision: --save '{}' cannot be written: {}", path,
               std::strerror(written ? errno : error));
}

}  // namespace

int run_restart_decision(const RestartDecisionOptions& o) {
  check_options(o);
  const RunFailure now = run_failure(o.exit_code, o.failures, o.log);
  std::optional<RunFailure> before;
  if (!o.previous.empty()) {
    const std::string text = read_regular("--previous", o.previous, true).value_or("");
    const std::string line = text.substr(0, text.find('\n'));
    if (!line.empty())
      before = run_failure_from_line(line, fmt::format("--previous '{}'", o.previous));
  }
  RestartLimits limits = o.limits;
  if (!o.world_sizes.empty()) read_runnable_world_sizes(o.world_sizes, limits);
  if (!o.save.empty()) save_line(o.save, run_failure_line(now));
  const RestartDecision decision = decide_restart(now, before, limits);
  if (!decision.restart) {
    fmt::print(stderr, "{}\n", decision.message);
    return 1;
  }
  if (!decision.note.empty()) fmt::print(stderr, "{}\n", decision.note);
  fmt::print("restart\n{}\n{}\n{}\n", now.steps_done, now.why, decision.world);
  return 0;
}

}  // namespace st
