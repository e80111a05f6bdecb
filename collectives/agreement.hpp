#pragma once
// Local failures inside collective work. When one rank throws where the others go on to the
// next collective, the ranks no longer call the same collectives and the job hangs. Work that
// can fail on some ranks only (reading this rank's part of a file, a non-finite value in this
// rank's shard) runs inside an agreement: every rank learns whether any failed, and with
// which message.
#include <functional>
#include <optional>
#include <string>

#include "collectives/process_group.hpp"

namespace st {

struct RankFailure {
  int rank = 0;         // the lowest rank that failed
  int code = 1;         // its exit code: 2 for bad input (InputError), 1 otherwise
  int failed = 0;       // how many ranks failed
  std::string message;  // the lowest failing rank's message, on every rank
};

// Collective: runs `fn` here, then agrees with every rank of `group` on the outcome (one
// all-reduce; two broadcasts when something failed). nullopt when no rank failed.
std::optional<RankFailure> agree_on_failure(ProcessGroup& group, const std::function<void()>& fn);

// Collective: runs `fn` here; when it failed on any rank, throws on every rank the lowest
// failing rank's error (InputError for bad input, Error otherwise), with its message, led by
// "rank R of N: " when not every rank failed.
void run_agreed(ProcessGroup& group, const std::function<void()>& fn);

}  // namespace st
