#pragma once
// Sharded checkpoints: every rank writes only its own shards of each state (FP32 masters,
// optimizer moments, ...), rank 0 a JSON manifest; the directory appears atomically with a
// completion marker written last. Loading verifies everything first, then each rank reads only
// the byte ranges of the old shards that overlap its new ones: any world size loads any other.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sharding/checkpoint_manifest.hpp"
#include "sharding/fsdp_runtime.hpp"

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
  // the process dies before save_checkpoint returns.
  std::function<void(const std::string&)> on_complete;
};

// Collective. Writes <root>/step-<step, 8 digits> (through a temporary directory, fsynced,
// renamed, then the COMPLETE marker) and removes all but the newest `keep` complete ones.
// Returns the checkpoint's path.
std::string save_checkpoint(const std::string& root, int64_t step, const nlohmann::json& meta,
                            FsdpRuntime& fsdp, const std::vector<ShardedState>& states,
                            const SaveOptions& options);

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
