#pragma once
// Sharded checkpoints: every rank writes only its own shards of each state (FP32 masters,
// optimizer moments, ...), rank 0 a JSON manifest; the directory appears atomically with a
// completion marker written last. Loading verifies everything first, then each rank reads only
// the byte ranges of the old shards that overlap its new ones: any world size loads any other.
#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_manifest.hpp"
#include "parallel/fsdp/fsdp_runtime.hpp"

namespace st {

// One kind of sharded state, given span by span in the order of FsdpRuntime::spans().
struct ShardedState {
  std::string name;           // "master", "exp_avg", ...: part of the file names
  std::vector<Tensor> spans;  // FP32; span k has as many elements as spans()[k]
};

// A complete checkpoint's directory and its checked manifest.
struct CheckpointInfo : CheckpointManifest {
  std::string path;
};

struct SaveOptions {
  int keep = 2;              // complete checkpoints kept under the root, newest first
  int slow_ms_per_unit = 0;  // a test hook: sleep after each unit's shard is written
  // Called on the rank that publishes (the group's rank 0) as soon as the COMPLETE marker is
  // durable, with the checkpoint's path: from then on it is the newest complete one, even if
  // the process dies before save_checkpoint returns. A background save calls it on its writer
  // thread: it must be thread-safe and own what it refers to.
  std::function<void(const std::string&)> on_complete;
  // A background save's writes give up past this (checked after each unit's shard).
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

// Collective. Writes <root>/step-<step, 8 digits> (through a temporary directory, fsynced,
// renamed, then the COMPLETE marker) and removes all but the newest `keep` complete ones.
// Returns the checkpoint's path.
std::string save_checkpoint(const std::string& root, int64_t step, const nlohmann::json& meta,
                            FsdpRuntime& fsdp, const std::vector<ShardedState>& states,
                            const SaveOptions& options);

// How a background save ended on this rank.
struct BackgroundSave {
  enum class Outcome { complete, failed, abandoned };
  Outcome outcome = Outcome::abandoned;
  int64_t step = 0;
  std::string path;     // the checkpoint's directory
  std::string message;  // failed: this rank's error ("" if only others failed); abandoned: why
  int error = 0;        // failed: the errno of this rank's I/O error (ENOSPC...), else 0
  std::vector<int> failed_ranks;  // failed: the ranks whose part failed
  // failed: this rank is the lowest that failed: it removes the temporaries and reports (the
  // others stay silent, so the job ends with one message)
  bool lowest_failed = false;
};

// Collective over `commit` (the ranks of fsdp's group, in a group made for it, with its own
// communicator and thread), run on a background thread while training goes on: writes this
// rank's files of `states` (staging copies, shaped as for save_checkpoint) into the save's
// temporary directory; then the ranks agree on the outcome (one all-reduce of every rank's
// success, sizes and checksums), and the group's rank 0 publishes the checkpoint as
// save_checkpoint does (manifest, rename, COMPLETE, older ones removed), only if every rank's
// files are durable. A failed write does not throw: every rank learns of it through the
// agreement. Past `options.deadline` it gives up: `commit` is aborted (a rank that never joins
// cannot keep the others waiting) and the outcome is abandoned. `spans` is fsdp.spans(), taken
// on the training thread. Under pipeline stages `commit` spans every stage's ranks (pp x the
// model group, pipeline rank 0's first) and `stages` is a copy of the pipeline group made for
// the saves: the other stages send their shards over it to pipeline rank 0's ranks, which
// write the same files as without stages.
BackgroundSave save_checkpoint_in_background(const std::string& root, int64_t step,
                                             const nlohmann::json& meta, const FsdpRuntime& fsdp,
                                             const std::vector<ShardSpan>& spans,
                                             const std::vector<ShardedState>& states,
                                             ProcessGroup& commit, ProcessGroup* stages,
                                             const SaveOptions& options);
// Removes what a failed or abandoned save of `step` left under `root` (its temporary
// directory); true when there was something. Call only once no rank writes there any more.
bool remove_unfinished_save(const std::string& root, int64_t step);

// What interrupted saves left under `root` (a job killed mid-save): each `.step-N.tmp` is removed;
// a `.step-N.old` (a checkpoint being replaced) is put back when its replacement is incomplete,
// else removed. Call only while no other job can be saving there (DirectoryLock). Returns one
// line per thing done, for the user.
std::vector<std::string> clean_interrupted_saves(const std::string& root);
// `step-N` directories under `root` without a COMPLETE marker, newer than the newest complete
// checkpoint (those a resume skips), with why.
std::vector<std::string> skipped_incomplete_checkpoints(const std::string& root);

// Where save_checkpoint puts the checkpoint of `step` under `root`.
std::string checkpoint_path(const std::string& root, int64_t step);
// The complete checkpoints directly under `root`, oldest first (none: empty).
std::vector<std::string> complete_checkpoints(const std::string& root);
// The newest complete checkpoint directly under `root`, or "" when there is none.
std::string latest_checkpoint(const std::string& root);

// Reads a checkpoint's manifest and checks its completion marker and every field
// (parse_checkpoint_manifest); an InputError naming the file or key otherwise.
CheckpointInfo read_checkpoint_info(const std::string& path);
// Checks the manifest's layout against `fsdp`'s model: parameter names, shapes, units, flat
// offsets, shard sizes and the file list; an InputError naming the key otherwise.
void check_checkpoint_layout(const CheckpointInfo& info, const FsdpRuntime& fsdp);

// Collective. Verifies every file's size and checksum (the ranks share the reading), then
// fills `states` (as for save_checkpoint, same names) with this rank's part of each.
void load_checkpoint(const CheckpointInfo& info, FsdpRuntime& fsdp,
                     const std::vector<ShardedState>& states);

}  // namespace st
