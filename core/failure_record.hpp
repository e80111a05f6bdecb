#pragma once
// What a failing rank leaves for the launcher that may restart the job (torchelastic's error
// file): one JSON record per rank in the folder $SHARDRUN_FAILURES names: the rank, its host,
// the steps it had completed, the class of the failure (a lost rank, an I/O error with its
// errno, bad input, a non-finite loss, a timeout, anything else) and its one-line message. The
// launcher decides from these (launch/restart_decision), not from the wording of the output.
#include <cstdint>
#include <exception>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace st {

enum class FailureClass { lost_rank, io, bad_input, non_finite, timeout, other };
const char* failure_class_name(FailureClass c);
// The class named `name`; an InputError naming `where` for any other name.
FailureClass parse_failure_class(const std::string& name, const std::string& where);

struct FailureRecord {
  int rank = 0;
  std::string host;
  int64_t steps_done = 0;  // steps complete when it failed
  FailureClass kind = FailureClass::other;
  int error = 0;  // errno of an I/O error, else 0
  std::string message;
  double unix_time = 0;  // when (seconds since the epoch): the first record is the cause
};

// The class of a caught failure, and its errno for an I/O error (IoError, std::system_error).
FailureClass classify_failure(const std::exception& e, int& error);

nlohmann::json failure_record_json(const FailureRecord& r);
// An InputError naming `where` and the field for a record that is not one.
FailureRecord failure_record_from_json(const nlohmann::json& j, const std::string& where);

// Where this process's record goes: the folder shardrun names in $SHARDRUN_FAILURES (read by
// the library's start-up, start_ranks); empty: nowhere.
void set_failure_record_folder(const std::string& dir);
// Writes this process's record into that folder (nothing when none is set); the first failure
// of a rank is kept. Never throws: it runs on the way out of a failing process.
void record_failure(FailureClass kind, int error, const std::string& message, int rank);
// The records in `dir`, oldest first (an unreadable or malformed file is skipped: a rank may
// have been killed while writing it).
std::vector<FailureRecord> read_failure_records(const std::string& dir);

}  // namespace st
