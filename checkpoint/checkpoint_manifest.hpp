#pragma once
// A checkpoint's manifest.json: what was saved (step, world, the caller's meta), the unit and
// parameter layout it was saved with, and every file's size and xxh64. Version 2 also carries
// the manifest's own xxh64, so a hand edit is refused; version 3 the tensor-parallel degree and
// how each parameter was sliced. Every field is still checked for type, range and consistency
// (older manifests load as they were written: version 1 without the checksum, tp = 1).
//
// Parameters are named with their whole shapes (global coordinates); a rank's file holds its
// units' shards, and under tensor parallelism its units are made of its TP rank's slices: rank
// r of world_size holds TP rank r % tp's slices and shard r / tp of each unit.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/model/param_spec.hpp"
#include "parallel/fsdp/unit_layout.hpp"

namespace st {

struct ManifestUnit {
  std::string name;
  int64_t numel = 0;        // real elements
  int64_t shard_numel = 0;  // elements per rank: ceil(numel / (world_size / tp))
};

struct ManifestParam {
  std::string name;
  Shape shape;  // the whole parameter's
  int unit = 0;
  int64_t flat_offset = 0;  // of its slice within the unit's flat buffer
  Placement placement;      // how it was sliced (replicate: whole on every TP rank)
  // Elements of one TP rank's slice, of a checkpoint saved with `tp` ranks.
  int64_t slice_numel(int tp) const;
};

struct ManifestFile {
  std::string file;  // checkpoint_file_name(state, rank)
  std::string state;
  int rank = 0;
  int64_t bytes = 0;
  std::string xxh64;  // 16 lowercase hex digits
};

struct CheckpointManifest {
  int64_t step = 0;     // steps completed when it was saved
  int world_size = 0;   // ranks that saved it (one copy of the model: dp_shard x tp)
  int tp = 1;           // their tensor-parallel degree (divides world_size)
  nlohmann::json meta;  // what the caller stored (config, optimizer, data position)
  std::vector<std::string> states;
  std::vector<ManifestUnit> units;
  std::vector<ManifestParam> params;
  std::vector<ManifestFile> files;  // rank-major: files[r * states.size() + s]

  // Every rank file's size: the units' shards of FP32, one after another.
  int64_t file_bytes() const;
};

// The file that rank `rank` writes for state `state` inside a checkpoint directory.
std::string checkpoint_file_name(const std::string& state, int rank);

// Version 2's JSON, with its checksum.
std::string manifest_text(const CheckpointManifest& manifest);

// Parses and checks a manifest's text (`where` names it in errors): format, version, checksum,
// every field's type and range, and their consistency (shard sizes with the world size, the
// file list with the states and ranks, every file's size with the units). InputError otherwise.
CheckpointManifest parse_checkpoint_manifest(const std::string& text, const std::string& where);

// Checks the manifest's layout against a model's (whose parameters may be TP slices: `specs`
// name their whole shapes): parameter names, whole shapes and units, and where the saved and
// the model's TP degree and slicing agree, the units' sizes and flat offsets too. An InputError
// naming the key and the model's value otherwise.
void check_manifest_layout(const CheckpointManifest& manifest, const std::vector<UnitLayout>& units,
                           const std::vector<ParamSpec>& specs, const std::string& where);

}  // namespace st
