#pragma once
// A run started again by `launch/shardrun --max-restarts` after a failure: what shardrun tells
// the job (through the environment), the mesh that fits the ranks that remain, and the metrics
// file carried over from the run that failed.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launch/config.hpp"

namespace st {

// Set by shardrun for a restart: SHARDRUN_RESTART = "K/N" (restart K of at most N),
// SHARDRUN_RESTART_RANKS (the failed run's world size), SHARDRUN_RESTART_STEP (the last step it
// printed, 0 for none) and SHARDRUN_RESTART_REASON (its failing rank's message).
struct RestartNotice {
  int64_t number = 0, limit = 0;
  int64_t ranks_before = 0;
  int64_t failed_after_step = 0;
  std::string reason;
};

// The notice, or nullopt when this run is not a restart; a malformed variable is an InputError
// naming it.
std::optional<RestartNotice> restart_notice_from_environment();

// shardrun --fault kill:R@S / lose:R@S, for tests: SHARDRUN_FAULT_KILL = "R@S[,R@S...]" asks
// world rank R to SIGKILL itself once step S is done (at the start of step S + 1), so the fault
// lands at the same step every time. Returns the steps (1-based, as printed) after which this
// rank dies; a malformed value is an InputError naming the variable.
std::vector<int64_t> injected_kills_from_environment(int world_rank);
// shardrun --fault link-down:H@S, for tests: SHARDRUN_FAULT_HOLD = "S[,S...]" holds every rank
// after step S until the launcher has taken the link down (launch/fault_injection.hpp).
std::vector<int64_t> injected_holds_from_environment();

// A restarted run resumes (checkpoint.resume = auto), and a mesh the configured degrees no
// longer fit (HSDP 2x2 on 3 ranks) falls back to the nearest valid one: the shard group's size
// kept where it divides the ranks, else the replicas' count, else FSDP over all. Returns what
// changed, one sentence each ("" when nothing did). Options the restart's mesh cannot apply
// are dropped, each named: hpZ's reshard_after_forward = N that does not divide the new shard
// group (true instead), and quantized collectives with no link between nodes left to quantize
// (none; judged on `detected_nodes`, each rank's node, or on sharding.ranks_per_node's pretend
// nodes; not judged when neither is known).
std::string adapt_config_to_restart(Config& config, int world_size,
                                    const std::vector<int>& detected_nodes = {});

// The world sizes from 1 to `world_size` this config can run at once adapt_config_to_restart
// has fitted the mesh (the global batch must split over the ranks, ...), and why each refused
// size near the top cannot (for shardrun's message). shardrun restarts a job that lost ranks
// at the largest of these the survivors can fill.
struct RunnableWorldSizes {
  int world_size = 0;
  std::vector<int> runnable;               // ascending
  std::map<int, std::string> refused_why;  // the refused sizes within 64 of world_size
};
RunnableWorldSizes runnable_world_sizes(const Config& config, int world_size);
std::string runnable_world_sizes_json(const RunnableWorldSizes& sizes);
// Where SHARDRUN_WORLD_SIZES names a file not yet written (shardrun --max-restarts sets it; the
// first run writes it at the job's full size), writes the sizes there as JSON (a temporary file
// renamed into place); nothing otherwise. Rank 0 calls it, before any adaptation to a restart.
void write_runnable_world_sizes(const Config& config, int world_size);

// The one line a restart prints: why, from which checkpoint and step, at which world size and mesh.
std::string restart_line(const RestartNotice& notice, const std::string& checkpoint,
                         int64_t resumed_after_step, int world_size, const std::string& mesh,
                         const std::string& changes);

// metrics.file across a resume: the lines of the earlier run that describe steps up to
// `steps_done` (step records with "step" < steps_done, validation and restart records "after
// step" <= steps_done), so the file holds one curve; later lines (steps to be recomputed) and
// lines that are not JSON objects go.
std::vector<std::string> metrics_lines_to_keep(const std::string& earlier, int64_t steps_done);

}  // namespace st
