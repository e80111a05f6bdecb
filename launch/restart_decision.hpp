#pragma once
// What shardrun --max-restarts does after a failed run, decided from the failure records the
// ranks wrote (core/failure_record) and, where no rank could write one (a rank killed), from
// the run's output: mpirun's note of the death and the last step printed. The first record is
// the cause; "the same failure twice" compares classes, errno and steps, never wording; a cause
// no restart can fix (bad input, a full disk or a refused permission) is not restarted at all.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/failure_record.hpp"

namespace st {

// One failed run as the supervisor sees it.
struct RunFailure {
  int exit_code = 1;
  FailureClass kind = FailureClass::other;
  int error = 0;
  int64_t steps_done = 0;
  std::string why;  // one line: "rank 1: failed: writing 'x': No space left on device"
};

// The cause of a run: the oldest record in `failures_dir`, else what `log` (the run's output)
// says: shardtrain's first message, else mpirun's note of a rank's death (a lost rank), else
// the exit code; the step from the record, else the last "step N/" line.
RunFailure run_failure(int exit_code, const std::string& failures_dir, const std::string& log);

struct RestartLimits {
  int attempt = 0;       // restarts so far
  int max_restarts = 0;  // --max-restarts
  int available = 0;     // ranks a restart can have
  int min_ranks = 1;     // --min-ranks
  // The world sizes the job can run at (ascending) and why some cannot, as its first run wrote
  // them (launch/elastic.hpp); empty when it wrote none: then any.
  std::vector<int> runnable;
  std::map<int, std::string> refused_why;
};

struct RestartDecision {
  bool restart = false;
  std::string message;  // "shardrun: not restarting: ..." (may be several lines) when not
  int world = 0;        // the restart's ranks: the largest runnable size the survivors fill
  std::string note;     // why `world` is below the ranks available ("" when it is not)
};

// Reads what write_runnable_world_sizes wrote into `limits`; a missing file leaves them empty,
// a malformed one is an InputError naming it.
void read_runnable_world_sizes(const std::string& path, RestartLimits& limits);

RestartDecision decide_restart(const RunFailure& now, const std::optional<RunFailure>& before,
                               const RestartLimits& limits);

// A RunFailure as one line of JSON (shardrun keeps the previous run's) and back.
std::string run_failure_line(const RunFailure& f);
RunFailure run_failure_from_line(const std::string& line, const std::string& where);

// shardtrain restart-decision (for launch/shardrun, not listed in --help): reads the run's
// records and output, compares with --previous (this run's line goes to --save) and either
// prints "restart", the steps done, the cause and the restart's world size on four lines
// (exit 0; a note on stderr when that size is below the ranks available) or its "not
// restarting" message on stderr (exit 1). It reads regular files only (a FIFO would hang the
// launcher) and refuses, naming the flag or field (an InputError: exit 2), an exit code of 0,
// counts out of range, a steps_done beyond any run, and a --save it cannot write (without it
// the same failure twice would go unnoticed).
struct RestartDecisionOptions {
  int exit_code = 1;
  std::string failures, log, previous, save, world_sizes;
  RestartLimits limits;
};
int run_restart_decision(const RestartDecisionOptions& options);

}  // namespace st
