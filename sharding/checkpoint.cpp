#include "sharding/checkpoint.hpp"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <thread>

#include "core/file_io.hpp"

namespace st {
namespace {

namespace fs = std::filesystem;
constexpr const char* kFormat = "shardtrain-checkpoint";
constexpr int kVersion = 1;
constexpr const char* kManifest = "manifest.json";
constexpr const char* kComplete = "COMPLETE";

std::string file_name(const std::string& state, int rank) {
  return fmt::format("{}.rank-{:05}.bin", state, rank);
}

std::string step_dir_name(int64_t step) {
  return fmt::format("step-{:08}", step);
}

// Element offset of each unit's shard within a rank's file, for shards of `shard_numel`.
std::vector<int64_t> unit_file_offsets(const std::vector<int64_t>& shard_numel) {
  std::vector<int64_t> off(shard_numel.size() + 1, 0);
  for (size_t u = 0; u < shard_numel.size(); ++u) off[u + 1] = off[u] + shard_numel[u];
  return off;
}

// Tests slow the writer down to kill a run mid-save (SHARDTRAIN_TEST_SLOW_CHECKPOINT_MS).
void test_delay() {
  static const char* ms = std::getenv("SHARDTRAIN_TEST_SLOW_CHECKPOINT_MS");
  if (ms) std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(ms)));
}

void check_states(const std::vector<ShardedState>& states, const std::vector<ShardSpan>& spans) {
  for (const ShardedState& s : states) {
    ST_CHECK(s.spans.size() == spans.size(), "state '{}' has {} spans, the shard has {}", s.name,
             s.spans.size(), spans.size());
    for (size_t k = 0; k < spans.size(); ++k)
      ST_CHECK(s.spans[k].numel() == spans[k].master.numel() && s.spans[k].dtype() == DType::f32,
               "state '{}' span {} ('{}') does not match the shard", s.name, k, spans[k].name);
  }
}

}  // namespace

std::string save_checkpoint(const std::string& root, int64_t step, const nlohmann::json& meta,
                            FsdpRuntime& fsdp, const std::vector<ShardedState>& states, int keep) {
  ProcessGroup& group = fsdp.group();
  const int rank = group.rank(), world = group.size();
  const std::vector<ShardSpan> spans = fsdp.spans();
  check_states(states, spans);
  const auto& units = fsdp.units();
  const fs::path final_dir = fs::path(root) / step_dir_name(step);
  const fs::path tmp_dir = fs::path(root) / fmt::format(".{}.tmp", step_dir_name(step));
  if (rank == 0) {
    fs::create_directories(root);
    fs::remove_all(tmp_dir);  // a crashed earlier attempt
    fs::create_directory(tmp_dir);
  }
  group.barrier()->wait();

  // This rank's files: per state, each unit's shard in unit order, padding as zeros.
  const size_t n = states.size();
  Tensor sums = Tensor::zeros("checkpoint.sums", {int64_t(4 * n)}, DType::i32);
  for (size_t s = 0; s < n; ++s) {
    OutputFile out((tmp_dir / file_name(states[s].name, rank)).string());
    XXH64_state_t* hash = XXH64_createState();
    XXH64_reset(hash, 0);
    int64_t bytes = 0;
    size_t k = 0;
    // Spans are written where they lie (no copy); the shard's tail padding as zeros.
    auto put = [&](const void* data, size_t len) {
      out.write(data, len);
      XXH64_update(hash, data, len);
      bytes += int64_t(len);
    };
    static const std::vector<float> zeros(4096, 0.f);
    for (size_t u = 0; u < units.size(); ++u) {
      int64_t filled = 0;
      for (; k < spans.size() && spans[k].unit == int(u); ++k) {
        ST_CHECK(spans[k].shard_offset == filled, "span '{}' leaves a gap in its shard",
                 spans[k].name);
        put(states[s].spans[k].raw(), states[s].spans[k].nbytes());
        filled += spans[k].master.numel();
      }
      for (int64_t left = units[u].shard_numel - filled; left > 0;) {
        const int64_t chunk = std::min<int64_t>(left, int64_t(zeros.size()));
        put(zeros.data(), size_t(chunk) * sizeof(float));
        left -= chunk;
      }
      test_delay();
    }
    out.sync_and_close();
    const uint64_t h = XXH64_digest(hash);
    XXH64_freeState(hash);
    int32_t* v = sums.data<int32_t>() + 4 * s;
    v[0] = int32_t(uint64_t(bytes) & 0xffffffffu);
    v[1] = int32_t(uint64_t(bytes) >> 32);
    v[2] = int32_t(h & 0xffffffffu);
    v[3] = int32_t(h >> 32);
  }
  Tensor all = Tensor::empty("checkpoint.all_sums", {int64_t(4 * n) * world}, DType::i32);
  group.all_gather(sums, all)->wait();

  if (rank == 0) {
    nlohmann::json manifest = {{"format", kFormat},
                               {"version", kVersion},
                               {"step", step},
                               {"world_size", world},
                               {"meta", meta},
                               {"states", nlohmann::json::array()},
                               {"units", nlohmann::json::array()},
                               {"params", nlohmann::json::array()},
                               {"files", nlohmann::json::array()}};
    for (const ShardedState& s : states) manifest["states"].push_back(s.name);
    const auto& specs = fsdp.model().param_specs();
    for (const UnitLayout& u : units) {
      manifest["units"].push_back(
          {{"name", u.name}, {"numel", u.numel}, {"shard_numel", u.shard_numel}});
      for (size_t k = 0; k < u.params.size(); ++k)
        manifest["params"].push_back({{"name", specs[u.params[k]].name},
                                      {"shape", specs[u.params[k]].shape},
                                      {"unit", u.unit},
                                      {"flat_offset", u.flat_offsets[k]}});
    }
    const uint32_t* a = reinterpret_cast<const uint32_t*>(all.data<int32_t>());
    for (int r = 0; r < world; ++r)
      for (size_t s = 0; s < n; ++s) {
        const uint32_t* v = a + size_t(r) * 4 * n + 4 * s;
        manifest["files"].push_back(
            {{"file", file_name(states[s].name, r)},
             {"state", states[s].name},
             {"rank", r},
             {"bytes", (uint64_t(v[1]) << 32) | v[0]},
             {"xxh64", fmt::format("{:016x}", (uint64_t(v[3]) << 32) | v[2])}});
      }
    write_text_file((tmp_dir / kManifest).string(), manifest.dump(1));
    sync_directory(tmp_dir.string());
    // Replace an existing checkpoint of the same step only once the new one is whole.
    const fs::path old_dir = fs::path(root) / fmt::format(".{}.old", step_dir_name(step));
    fs::remove_all(old_dir);
    if (fs::exists(final_dir)) fs::rename(final_dir, old_dir);
    fs::rename(tmp_dir, final_dir);
    sync_directory(root);
    write_text_file((final_dir / kComplete).string(), "complete\n");
    sync_directory(final_dir.string());
    fs::remove_all(old_dir);
    // Keep the newest `keep` complete checkpoints.
    std::vector<fs::path> complete;
    for (const auto& e : fs::directory_iterator(root))
      if (e.is_directory() && e.path().filename().string().rfind("step-", 0) == 0 &&
          fs::exists(e.path() / kComplete))
        complete.push_back(e.path());
    std::sort(complete.begin(), complete.end());
    for (size_t i = 0; i + size_t(keep) < complete.size(); ++i) fs::remove_all(complete[i]);
  }
  group.barrier()->wait();
  return final_dir.string();
}

std::string latest_checkpoint(const std::string& root) {
  if (root.empty() || !fs::is_directory(root)) return "";
  std::string best;
  for (const auto& e : fs::directory_iterator(root)) {
    const std::string name = e.path().filename().string();
    if (e.is_directory() && name.rfind("step-", 0) == 0 && fs::exists(e.path() / kComplete) &&
        (best.empty() || name > fs::path(best).filename().string()))
      best = e.path().string();
  }
  return best;
}

namespace {

const nlohmann::json& field(const nlohmann::json& obj, const char* key, const std::string& where,
                            const std::string& manifest_path) {
  if (!obj.is_object() || !obj.contains(key))
    fail_input("'{}': {} has no '{}'", manifest_path, where, key);
  return obj.at(key);
}

}  // namespace

CheckpointInfo read_checkpoint_info(const std::string& path) {
  const fs::path dir(path);
  const std::string manifest_path = (dir / kManifest).string();
  if (!fs::is_directory(dir)) fail_input("checkpoint '{}' is not a directory", path);
  if (!fs::exists(dir / kComplete))
    fail_input("checkpoint '{}' has no {} marker: it was not completely written", path, kComplete);
  CheckpointInfo info;
  info.path = path;
  info.manifest = nlohmann::json::parse(read_text_file(manifest_path), nullptr, false);
  const nlohmann::json& m = info.manifest;
  if (m.is_discarded() || !m.is_object()) fail_input("'{}' is not valid JSON", manifest_path);
  auto field = [&](const nlohmann::json& obj, const char* key, const std::string& where) {
    return st::field(obj, key, where, manifest_path);
  };
  try {
    if (field(m, "format", "the manifest") != kFormat)
      fail_input("'{}' is not a shardtrain checkpoint manifest", manifest_path);
    if (field(m, "version", "the manifest") != kVersion)
      fail_input("'{}': checkpoint format version {} is not supported (this build reads {})",
                 manifest_path, field(m, "version", "the manifest").dump(), kVersion);
    info.step = field(m, "step", "the manifest").get<int64_t>();
    info.world_size = field(m, "world_size", "the manifest").get<int>();
    info.meta = field(m, "meta", "the manifest");
    if (info.world_size < 1 || info.step < 0)
      fail_input("'{}': world_size {} or step {} out of range", manifest_path, info.world_size,
                 info.step);
  } catch (const nlohmann::json::exception& e) {
    fail_input("'{}': {}", manifest_path, e.what());
  }
  return info;
}

void check_checkpoint_layout(const CheckpointInfo& info, const FsdpRuntime& fsdp) {
  const nlohmann::json& m = info.manifest;
  const std::string manifest_path = (fs::path(info.path) / kManifest).string();
  auto field = [&](const nlohmann::json& obj, const char* key, const std::string& where) {
    return st::field(obj, key, where, manifest_path);
  };
  try {
    const auto& units = fsdp.units();
    const auto& specs = fsdp.model().param_specs();
    const auto& munits = field(m, "units", "the manifest");
    if (!munits.is_array() || munits.size() != units.size())
      fail_input("'{}': the checkpoint has {} units, this model {}", manifest_path,
                 munits.is_array() ? munits.size() : 0, units.size());
    for (size_t u = 0; u < units.size(); ++u) {
      const std::string where = fmt::format("units[{}]", u);
      const int64_t numel = field(munits[u], "numel", where).get<int64_t>();
      const int64_t shard = field(munits[u], "shard_numel", where).get<int64_t>();
      if (numel != units[u].numel)
        fail_input("'{}': {} ('{}') has {} elements, this model's has {}", manifest_path, where,
                   units[u].name, numel, units[u].numel);
      if (shard != (numel + info.world_size - 1) / info.world_size)
        fail_input("'{}': {}.shard_numel = {} does not split {} elements over {} ranks",
                   manifest_path, where, shard, numel, info.world_size);
    }
    const auto& mparams = field(m, "params", "the manifest");
    if (!mparams.is_array() || mparams.size() != specs.size())
      fail_input("'{}': the checkpoint has {} parameters, this model {}", manifest_path,
                 mparams.is_array() ? mparams.size() : 0, specs.size());
    size_t k = 0;
    for (const UnitLayout& u : units)
      for (size_t j = 0; j < u.params.size(); ++j, ++k) {
        const ParamSpec& spec = specs[u.params[j]];
        const std::string where = fmt::format("params[{}]", k);
        const std::string name = field(mparams[k], "name", where).get<std::string>();
        if (name != spec.name)
          fail_input("'{}': {} is '{}' where this model has '{}'", manifest_path, where, name,
                     spec.name);
        if (field(mparams[k], "shape", where).get<Shape>() != spec.shape)
          fail_input("'{}': '{}' has shape {} in the checkpoint and {} in this model",
                     manifest_path, name, field(mparams[k], "shape", where).dump(),
                     shape_string(spec.shape));
        if (field(mparams[k], "unit", where).get<int>() != u.unit ||
            field(mparams[k], "flat_offset", where).get<int64_t>() != u.flat_offsets[j])
          fail_input(
              "'{}': '{}' sits at unit {} offset {} in the checkpoint, not at unit {} "
              "offset {} as in this model",
              manifest_path, name, field(mparams[k], "unit", where).dump(),
              field(mparams[k], "flat_offset", where).dump(), u.unit, u.flat_offsets[j]);
      }
    const auto& files = field(m, "files", "the manifest");
    const auto& states = field(m, "states", "the manifest");
    if (!files.is_array() || !states.is_array() ||
        files.size() != states.size() * size_t(info.world_size))
      fail_input("'{}': expected {} files ({} states x {} ranks)", manifest_path,
                 states.size() * size_t(info.world_size), states.size(), info.world_size);
    for (size_t i = 0; i < files.size(); ++i) {
      const std::string where = fmt::format("files[{}]", i);
      const std::string want =
          file_name(states[i % states.size()].get<std::string>(), int(i / states.size()));
      if (field(files[i], "file", where) != want)
        fail_input("'{}': {} should be '{}'", manifest_path, where, want);
      field(files[i], "bytes", where).get<uint64_t>();
      field(files[i], "xxh64", where).get<std::string>();
    }
  } catch (const nlohmann::json::exception& e) {
    fail_input("'{}': {}", manifest_path, e.what());
  }
}

void load_checkpoint(const CheckpointInfo& info, FsdpRuntime& fsdp,
                     const std::vector<ShardedState>& states) {
  ProcessGroup& group = fsdp.group();
  const int rank = group.rank(), world = group.size();
  const std::vector<ShardSpan> spans = fsdp.spans();
  check_states(states, spans);
  const nlohmann::json& m = info.manifest;
  const fs::path dir(info.path);
  const auto& units = fsdp.units();
  const int old_world = info.world_size;
  std::vector<int64_t> old_shard;
  for (const auto& u : m["units"]) old_shard.push_back(u["shard_numel"].get<int64_t>());
  const std::vector<int64_t> old_off = unit_file_offsets(old_shard);
  const int64_t file_bytes = old_off.back() * int64_t(sizeof(float));
  std::vector<std::string> state_names = m["states"].get<std::vector<std::string>>();
  for (const ShardedState& s : states)
    if (std::find(state_names.begin(), state_names.end(), s.name) == state_names.end())
      fail_input("checkpoint '{}' holds no '{}' state (it has {})", info.path, s.name,
                 nlohmann::json(state_names).dump());

  // 1. Verify every file (size, checksum) before using any; file i is read by rank i % world.
  const auto& files = m["files"];
  Tensor status = Tensor::zeros("checkpoint.status", {int64_t(files.size())}, DType::f64);
  for (size_t i = size_t(rank); i < files.size(); i += size_t(world)) {
    const std::string path = (dir / files[i]["file"].get<std::string>()).string();
    double code = 0;
    if (!fs::exists(path)) {
      code = 1;
    } else {
      InputFile f(path);
      if (f.size() != file_bytes || files[i]["bytes"].get<int64_t>() != file_bytes) {
        code = 2;
      } else {
        XXH64_state_t* hash = XXH64_createState();
        XXH64_reset(hash, 0);
        std::vector<char> buf(size_t(8) << 20);
        for (int64_t off = 0; off < file_bytes; off += int64_t(buf.size())) {
          const size_t len = size_t(std::min<int64_t>(int64_t(buf.size()), file_bytes - off));
          f.read_at(buf.data(), len, off);
          XXH64_update(hash, buf.data(), len);
        }
        if (fmt::format("{:016x}", XXH64_digest(hash)) != files[i]["xxh64"].get<std::string>())
          code = 3;
        XXH64_freeState(hash);
      }
    }
    status.data<double>()[i] = code;
  }
  group.all_reduce(status, {.op = ReduceOp::max})->wait();
  for (size_t i = 0; i < files.size(); ++i) {
    const double code = status.data<double>()[i];
    const std::string path = (dir / files[i]["file"].get<std::string>()).string();
    if (code == 1) fail_input("checkpoint file '{}' is missing", path);
    if (code == 2)
      fail_input(
          "checkpoint file '{}' has the wrong size (expected {} bytes): truncated or "
          "not from this checkpoint",
          path, file_bytes);
    if (code == 3) fail_input("checkpoint file '{}' fails its xxh64 checksum: it is corrupt", path);
  }

  // 2. Read the old byte ranges that overlap this rank's new shard of each unit.
  for (const ShardedState& state : states) {
    std::vector<std::unique_ptr<InputFile>> readers(static_cast<size_t>(old_world));
    size_t k = 0;
    for (size_t u = 0; u < units.size(); ++u) {
      const int64_t numel = units[u].numel, S = units[u].shard_numel, So = old_shard[u];
      const int64_t lo = int64_t(rank) * S, hi = std::min(numel, lo + S);
      std::vector<float> shard(size_t(S), 0.f);
      for (int q = 0; q < old_world && lo < hi; ++q) {
        const int64_t a = std::max(lo, int64_t(q) * So), b = std::min(hi, int64_t(q + 1) * So);
        if (a >= b) continue;
        if (!readers[size_t(q)])
          readers[size_t(q)] =
              std::make_unique<InputFile>((dir / file_name(state.name, q)).string());
        readers[size_t(q)]->read_at(shard.data() + (a - lo), size_t(b - a) * sizeof(float),
                                    (old_off[u] + a - int64_t(q) * So) * int64_t(sizeof(float)));
      }
      for (; k < spans.size() && spans[k].unit == int(u); ++k)
        std::copy_n(shard.data() + spans[k].shard_offset, spans[k].master.numel(),
                    state.spans[k].data<float>());
    }
  }
  group.barrier()->wait();
}

}  // namespace st
