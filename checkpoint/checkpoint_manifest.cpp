#include "checkpoint/checkpoint_manifest.hpp"

#include <fmt/format.h>
#include <xxhash.h>

#include <set>

#include "core/error.hpp"
#include "core/json_parse.hpp"
#include "core/model/param_slice.hpp"

namespace st {
namespace {

constexpr const char* kFormat = "shardtrain-checkpoint";
// 2: the manifest carries its own checksum; 3: the TP degree and each parameter's placement
constexpr int kVersion = 3;
constexpr int kOldestVersion = 1;
constexpr const char* kChecksumKey = "manifest_xxh64";
// Bounds far beyond any checkpoint this runtime writes, so sizes computed from them fit.
constexpr int64_t kMaxStep = int64_t(1) << 50;
constexpr int64_t kMaxWorld = int64_t(1) << 20;
constexpr int64_t kMaxNumel = int64_t(1) << 50;
constexpr size_t kMaxStates = 64;

std::string hex64(uint64_t v) {
  return fmt::format("{:016x}", v);
}

// The checksum of a manifest: xxh64 of its JSON (one-space indent) without the checksum key.
std::string checksum_of(nlohmann::json manifest) {
  manifest.erase(kChecksumKey);
  const std::string text = manifest.dump(1);
  return hex64(XXH64(text.data(), text.size(), 0));
}

// Field access that names the manifest and the field's path in every error.
struct Reader {
  const std::string& where;

  const nlohmann::json& at(const nlohmann::json& obj, const char* key,
                           const std::string& path) const {
    if (!obj.is_object()) fail_input("{}: {} is not a JSON object", where, path);
    if (!obj.contains(key)) fail_input("{}: {} has no '{}'", where, path, key);
    return obj.at(key);
  }
  int64_t integer(const nlohmann::json& obj, const char* key, const std::string& path, int64_t lo,
                  int64_t hi) const {
    return json_int(at(obj, key, path), fmt::format("{}: {}.{}", where, path, key), lo, hi);
  }
  std::string string(const nlohmann::json& obj, const char* key, const std::string& path) const {
    const nlohmann::json& v = at(obj, key, path);
    if (!v.is_string() || v.get<std::string>().size() > 4096)
      fail_input("{}: {}.{} = {} must be a string", where, path, key, v.dump());
    return v.get<std::string>();
  }
  const nlohmann::json& array(const nlohmann::json& obj, const char* key, size_t max) const {
    const nlohmann::json& v = at(obj, key, "the manifest");
    if (!v.is_array() || v.size() > max)
      fail_input("{}: '{}' must be an array of at most {} entries", where, key, max);
    return v;
  }
};

bool is_state_name(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

void parse_units(const Reader& r, const nlohmann::json& m, CheckpointManifest& out) {
  const nlohmann::json& units = r.array(m, "units", size_t(1) << 20);
  for (size_t u = 0; u < units.size(); ++u) {
    const std::string path = fmt::format("units[{}]", u);
    ManifestUnit unit{r.string(units[u], "name", path),
                      r.integer(units[u], "numel", path, 1, kMaxNumel),
                      r.integer(units[u], "shard_numel", path, 1, kMaxNumel)};
    const int shards = out.world_size / out.tp;
    const int64_t want = (unit.numel + shards - 1) / shards;
    if (unit.shard_numel != want)
      fail_input("{}: {}.shard_numel = {} does not split {} elements over {} ranks (that is {})",
                 r.where, path, unit.shard_numel, unit.numel, shards, want);
    out.units.push_back(unit);
  }
  if (out.units.empty()) fail_input("{}: 'units' is empty", r.where);
}

// A sliced parameter's placement: a dimension of `shape` that splits into `parts` segments of
// `tp` pieces in whole blocks, or of fewer pieces dividing `tp` when the blocks are shared.
Placement parse_placement(const Reader& r, const nlohmann::json& v, const std::string& path,
                          const Shape& shape, int tp) {
  Placement p = Placement::shard(int(r.integer(v, "dim", path, 0, int64_t(shape.size()) - 1)),
                                 r.integer(v, "block", path, 1, kMaxNumel),
                                 r.integer(v, "parts", path, 1, kMaxNumel));
  if (v.contains("shares_blocks")) {
    if (!v["shares_blocks"].is_boolean())
      fail_input("{}: {}.shares_blocks must be true or false", r.where, path);
    p.shares_blocks = v["shares_blocks"].get<bool>();
  }
  const int64_t extent = shape[size_t(p.dim)];
  const int pieces = slice_pieces(shape, p, tp);
  if (extent % p.parts != 0 || (extent / p.parts) % (p.block * pieces) != 0)
    fail_input(
        "{}: {} splits dimension {} ({}) into {} part(s) of {} TP ranks' pieces in blocks of "
        "{}, which does not divide",
        r.where, path, p.dim, extent, p.parts, tp, p.block);
  return p;
}

void parse_params(const Reader& r, const nlohmann::json& m, CheckpointManifest& out) {
  const nlohmann::json& params = r.array(m, "params", size_t(1) << 24);
  for (size_t k = 0; k < params.size(); ++k) {
    const std::string path = fmt::format("params[{}]", k);
    ManifestParam p;
    p.name = r.string(params[k], "name", path);
    p.shape = json_int_array(r.at(params[k], "shape", path),
                             fmt::format("{}: {}.shape", r.where, path), 0, kMaxNumel);
    if (p.shape.size() > 8) fail_input("{}: {}.shape has more than 8 dimensions", r.where, path);
    int64_t numel = 1;
    for (int64_t d : p.shape)
      if (__builtin_mul_overflow(numel, d, &numel) || numel > kMaxNumel)
        fail_input("{}: {}.shape {} has too many elements", r.where, path,
                   r.at(params[k], "shape", path).dump());
    if (params[k].is_object() && params[k].contains("placement"))
      p.placement =
          parse_placement(r, params[k]["placement"], path + ".placement", p.shape, out.tp);
    p.unit = int(r.integer(params[k], "unit", path, 0, int64_t(out.units.size()) - 1));
    const int64_t unit_numel = out.units[size_t(p.unit)].numel;
    p.flat_offset = r.integer(params[k], "flat_offset", path, 0, unit_numel);
    numel = p.slice_numel(out.tp);
    if (numel > unit_numel - p.flat_offset)
      fail_input("{}: {} ('{}', {} elements at offset {}) does not fit unit {} ({} elements)",
                 r.where, path, p.name, numel, p.flat_offset, p.unit, unit_numel);
    out.params.push_back(std::move(p));
  }
}

void parse_files(const Reader& r, const nlohmann::json& m, CheckpointManifest& out) {
  const nlohmann::json& states = r.array(m, "states", kMaxStates);
  for (size_t s = 0; s < states.size(); ++s) {
    const std::string name = states[s].is_string() ? states[s].get<std::string>() : "";
    if (!is_state_name(name))
      fail_input("{}: states[{}] = {} must be a name of letters, digits and '_'", r.where, s,
                 states[s].dump());
    if (std::find(out.states.begin(), out.states.end(), name) != out.states.end())
      fail_input("{}: state '{}' is listed twice", r.where, name);
    out.states.push_back(name);
  }
  if (out.states.empty()) fail_input("{}: 'states' is empty", r.where);
  const size_t want = out.states.size() * size_t(out.world_size);
  const nlohmann::json& files = r.array(m, "files", kMaxStates * size_t(kMaxWorld));
  if (files.size() != want)
    fail_input("{}: expected {} files ({} states x {} ranks), found {}", r.where, want,
               out.states.size(), out.world_size, files.size());
  const int64_t bytes = out.file_bytes();
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string path = fmt::format("files[{}]", i);
    ManifestFile f;
    f.state = out.states[i % out.states.size()];
    f.rank = int(i / out.states.size());
    f.file = checkpoint_file_name(f.state, f.rank);
    if (r.string(files[i], "file", path) != f.file ||
        r.string(files[i], "state", path) != f.state ||
        r.integer(files[i], "rank", path, 0, kMaxWorld) != f.rank)
      fail_input("{}: {} should be file '{}' of state '{}' and rank {}", r.where, path, f.file,
                 f.state, f.rank);
    f.bytes = r.integer(files[i], "bytes", path, 0, INT64_MAX);
    if (f.bytes != bytes)
      fail_input("{}: {}.bytes = {}, but the units' shards make {} bytes per file", r.where, path,
                 f.bytes, bytes);
    f.xxh64 = r.string(files[i], "xxh64", path);
    if (f.xxh64.size() != 16 || f.xxh64.find_first_not_of("0123456789abcdef") != std::string::npos)
      fail_input("{}: {}.xxh64 = '{}' must be 16 lowercase hex digits", r.where, path, f.xxh64);
    out.files.push_back(std::move(f));
  }
}

}  // namespace

std::string checkpoint_file_name(const std::string& state, int rank) {
  return fmt::format("{}.rank-{:05}.bin", state, rank);
}

int64_t ManifestParam::slice_numel(int tp) const {
  const int64_t whole = shape_numel(shape);
  return placement.kind == Placement::Kind::shard ? whole / slice_pieces(shape, placement, tp)
                                                  : whole;
}

int64_t CheckpointManifest::file_bytes() const {
  int64_t bytes = 0;
  for (const ManifestUnit& u : units)
    if (__builtin_add_overflow(bytes, u.shard_numel * int64_t(sizeof(float)), &bytes))
      fail_input("the checkpoint's units add up to more than 2^63 bytes per file");
  return bytes;
}

std::string manifest_text(const CheckpointManifest& c) {
  nlohmann::json m = {{"format", kFormat},
                      {"version", kVersion},
                      {"step", c.step},
                      {"world_size", c.world_size},
                      {"tp", c.tp},
                      {"meta", c.meta},
                      {"states", c.states},
                      {"units", nlohmann::json::array()},
                      {"params", nlohmann::json::array()},
                      {"files", nlohmann::json::array()}};
  for (const ManifestUnit& u : c.units)
    m["units"].push_back({{"name", u.name}, {"numel", u.numel}, {"shard_numel", u.shard_numel}});
  for (const ManifestParam& p : c.params) {
    nlohmann::json& e = m["params"].emplace_back(nlohmann::json{
        {"name", p.name}, {"shape", p.shape}, {"unit", p.unit}, {"flat_offset", p.flat_offset}});
    if (p.placement.kind == Placement::Kind::shard) {
      e["placement"] = {
          {"dim", p.placement.dim}, {"parts", p.placement.parts}, {"block", p.placement.block}};
      // Only where set, so manifests without shared blocks read as before.
      if (p.placement.shares_blocks) e["placement"]["shares_blocks"] = true;
    }
  }
  for (const ManifestFile& f : c.files)
    m["files"].push_back({{"file", f.file},
                          {"state", f.state},
                          {"rank", f.rank},
                          {"bytes", f.bytes},
                          {"xxh64", f.xxh64}});
  m[kChecksumKey] = checksum_of(m);
  return m.dump(1);
}

CheckpointManifest parse_checkpoint_manifest(const std::string& text, const std::string& where) {
  const nlohmann::json m = parse_json_object(text, where);
  const Reader r{where};
  if (!m.contains("format") || m["format"] != kFormat)
    fail_input("{} is not a shardtrain checkpoint manifest (no \"format\": \"{}\")", where,
               kFormat);
  const int64_t version = r.integer(m, "version", "the manifest", 0, INT64_MAX);
  if (version < kOldestVersion || version > kVersion)
    fail_input("{}: checkpoint format version {} is not supported (this build reads {} to {})",
               where, version, kOldestVersion, kVersion);
  if (version >= 2 && r.string(m, kChecksumKey, "the manifest") != checksum_of(m))
    fail_input("{}: the manifest does not match its own checksum ({}): it was edited or damaged",
               where, kChecksumKey);
  CheckpointManifest out;
  out.step = r.integer(m, "step", "the manifest", 0, kMaxStep);
  out.world_size = int(r.integer(m, "world_size", "the manifest", 1, kMaxWorld));
  if (version >= 3) {
    out.tp = int(r.integer(m, "tp", "the manifest", 1, out.world_size));
    if (out.world_size % out.tp != 0)
      fail_input("{}: tp = {} does not divide world_size = {}", where, out.tp, out.world_size);
  }
  out.meta = r.at(m, "meta", "the manifest");
  if (!out.meta.is_object()) fail_input("{}: 'meta' must be a JSON object", where);
  parse_units(r, m, out);
  parse_params(r, m, out);
  parse_files(r, m, out);
  return out;
}

void check_manifest_layout(const CheckpointManifest& m, const std::vector<UnitLayout>& units,
                           const std::vector<ParamSpec>& specs, const std::string& where) {
  if (m.units.size() != units.size())
    fail_input("{}: the checkpoint has {} units, this model {}", where, m.units.size(),
               units.size());
  if (m.params.size() != specs.size())
    fail_input("{}: the checkpoint has {} parameters, this model {}", where, m.params.size(),
               specs.size());
  // Sliced alike (the same TP degree and placements), the units are the same bytes.
  bool sliced_alike = true;
  size_t k = 0;
  for (const UnitLayout& u : units)
    for (size_t j = 0; j < u.params.size(); ++j, ++k) {
      const ParamSpec& spec = specs[u.params[j]];
      const ManifestParam& p = m.params[k];
      if (p.name != spec.name)
        fail_input("{}: params[{}] is '{}' where this model has '{}'", where, k, p.name, spec.name);
      if (p.shape != spec.whole_shape())
        fail_input("{}: '{}' has shape {} in the checkpoint and {} in this model", where, p.name,
                   shape_string(p.shape), shape_string(spec.whole_shape()));
      if (p.unit != u.unit)
        fail_input("{}: '{}' belongs to unit {} in the checkpoint, to unit {} in this model", where,
                   p.name, p.unit, u.unit);
      const Placement mine = spec.sliced() ? spec.placement : Placement{};
      sliced_alike = sliced_alike && m.tp == spec.tp_ranks && p.placement == mine;
    }
  if (!sliced_alike) return;
  for (size_t u = 0; u < units.size(); ++u)
    if (m.units[u].numel != units[u].numel)
      fail_input("{}: units[{}] ('{}') has {} elements, this model's has {}", where, u,
                 units[u].name, m.units[u].numel, units[u].numel);
  k = 0;
  for (const UnitLayout& u : units)
    for (size_t j = 0; j < u.params.size(); ++j, ++k)
      if (m.params[k].flat_offset != u.flat_offsets[j])
        fail_input(
            "{}: '{}' sits at unit {} offset {} in the checkpoint, not at offset {} as in this "
            "model",
            where, m.params[k].name, u.unit, m.params[k].flat_offset, u.flat_offsets[j]);
}

}  // namespace st
