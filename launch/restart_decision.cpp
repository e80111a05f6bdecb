#include "launch/restart_decision.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>

#include "core/error.hpp"
#include "core/json_parse.hpp"

namespace st {
namespace {

// Errors of the machine, not of the moment: a restart meets them again.
bool deterministic_io(int error) {
  return error == ENOSPC || error == EDQUOT || error == EFBIG || error == EACCES ||
         error == EPERM || error == EROFS;
}

// The cause when no rank left a record, from the output (the launcher's old rules).
RunFailure from_output(int exit_code, const std::string& log) {
  RunFailure f;
  f.exit_code = exit_code;
  f.kind = exit_code == 2 ? FailureClass::bad_input : FailureClass::other;
  std::ifstream in(log);
  std::string line, first_message, death;
  static const std::regex step_line(R"(^step +([0-9]+)/)");
  static const std::regex died(
      R"(process rank ([0-9]+) with PID [0-9]+ on node ([^ ]+) (exited on signal [0-9]+ \([^)]*\)))");
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, step_line)) f.steps_done = std::stoll(m[1].str());
    if (first_message.empty() && line.rfind("shardtrain: ", 0) == 0 &&
        line.rfind("shardtrain: interrupted ", 0) != 0 &&
        line.rfind("shardtrain: terminated ", 0) != 0)
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
  const auto records = read_failure_records(failures_dir);
  if (records.empty()) return from_output(exit_code, log);
  // A rank cut off from the others (its host's link down) blames them in a record the launcher
  // never heard: the oldest record whose message reached the output is the cause, when any did.
  std::ifstream in(log);
  const std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
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
  std::ifstream in(path);
  if (!in) return;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
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
  f.steps_done = json_int_at(j, "steps_done", where, 0, INT64_MAX);
  f.why = j["why"].get<std::string>();
  return f;
}

int run_restart_decision(const RestartDecisionOptions& o) {
  const RunFailure now = run_failure(o.exit_code, o.failures, o.log);
  std::optional<RunFailure> before;
  if (!o.previous.empty()) {
    std::ifstream in(o.previous);
    std::string line;
    if (in && std::getline(in, line) && !line.empty())
      before = run_failure_from_line(line, fmt::format("'{}'", o.previous));
  }
  if (!o.save.empty()) std::ofstream(o.save) << run_failure_line(now) << "\n";
  RestartLimits limits = o.limits;
  if (!o.world_sizes.empty()) read_runnable_world_sizes(o.world_sizes, limits);
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
