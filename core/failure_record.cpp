#include "core/failure_record.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "core/error.hpp"
#include "core/json_parse.hpp"
#include "core/liveness.hpp"

namespace st {
namespace {

constexpr FailureClass kClasses[] = {FailureClass::lost_rank, FailureClass::io,
                                     FailureClass::bad_input, FailureClass::non_finite,
                                     FailureClass::timeout,   FailureClass::other};

}  // namespace

const char* failure_class_name(FailureClass c) {
  switch (c) {
    case FailureClass::lost_rank:
      return "lost_rank";
    case FailureClass::io:
      return "io";
    case FailureClass::bad_input:
      return "bad_input";
    case FailureClass::non_finite:
      return "non_finite";
    case FailureClass::timeout:
      return "timeout";
    case FailureClass::other:
      return "other";
  }
  return "other";
}

FailureClass classify_failure(const std::exception& e, int& error) {
  error = 0;
  if (const auto* io = dynamic_cast<const IoError*>(&e)) {
    error = io->error;
    return FailureClass::io;
  }
  if (const auto* sys = dynamic_cast<const std::system_error*>(&e)) {
    if (sys->code().category() == std::generic_category() ||
        sys->code().category() == std::system_category()) {
      error = sys->code().value();
      return FailureClass::io;
    }
  }
  if (dynamic_cast<const InputError*>(&e)) return FailureClass::bad_input;
  if (dynamic_cast<const AgreedError*>(&e)) return FailureClass::non_finite;
  return FailureClass::other;
}

nlohmann::json failure_record_json(const FailureRecord& r) {
  return {{"rank", r.rank},
          {"host", r.host},
          {"steps_done", r.steps_done},
          {"class", failure_class_name(r.kind)},
          {"errno", r.error},
          {"message", r.message},
          {"time", r.unix_time}};
}

FailureRecord failure_record_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) fail_input("{} is not a JSON object", where);
  FailureRecord r;
  r.rank = int(json_int_at(j, "rank", where, 0, 1 << 24));
  r.steps_done = json_int_at(j, "steps_done", where, 0, INT64_MAX);
  r.error = int(json_int_at(j, "errno", where, 0, 4095));
  r.unix_time = json_number_at(j, "time", where);
  for (const char* key : {"host", "class", "message"})
    if (!j.contains(key) || !j[key].is_string()) fail_input("{}: {} must be a string", where, key);
  r.host = j["host"].get<std::string>();
  r.message = j["message"].get<std::string>();
  r.kind = parse_failure_class(j["class"].get<std::string>(), where);
  return r;
}

FailureClass parse_failure_class(const std::string& name, const std::string& where) {
  const auto* it = std::find_if(std::begin(kClasses), std::end(kClasses),
                                [&](FailureClass c) { return name == failure_class_name(c); });
  if (it == std::end(kClasses))
    fail_input("{}: class '{}' is not lost_rank, io, bad_input, non_finite, timeout or other",
               where, name);
  return *it;
}

namespace {
std::string& record_folder() {
  static std::string folder;
  return folder;
}
}  // namespace

void set_failure_record_folder(const std::string& dir) {
  record_folder() = dir;
}

void record_failure(FailureClass kind, int error, const std::string& message, int rank) {
  const std::string& dir = record_folder();
  if (dir.empty()) return;
  try {
    FailureRecord r;
    r.rank = rank;
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    r.host = host;
    r.steps_done = liveness::steps_done();
    r.kind = kind;
    r.error = error;
    r.message = message;
    r.unix_time =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    const std::filesystem::path path =
        std::filesystem::path(dir) / fmt::format("rank-{}.json", rank);
    if (std::filesystem::exists(path)) return;  // this rank's first failure is the one
    const std::string partial = path.string() + ".partial";
    {
      std::ofstream out(partial);
      out << failure_record_json(r).dump() << "\n";
      if (!out.flush()) return;
    }
    std::filesystem::rename(partial, path);
  } catch (...) {
    // The failure itself is reported on stderr whatever happens here.
  }
}

std::vector<FailureRecord> read_failure_records(const std::string& dir) {
  std::vector<FailureRecord> records;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("rank-", 0) != 0 || entry.path().extension() != ".json") continue;
    try {
      std::ifstream in(entry.path());
      const std::string text((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
      records.push_back(failure_record_from_json(parse_json_object(text, name), name));
    } catch (const std::exception&) {
    }
  }
  std::sort(records.begin(), records.end(), [](const FailureRecord& a, const FailureRecord& b) {
    return a.unix_time != b.unix_time ? a.unix_time < b.unix_time : a.rank < b.rank;
  });
  return records;
}

}  // namespace st
