#include "checkpoint/checkpoint.hpp"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include "collectives/agreement.hpp"
#include "collectives/mpi_runtime.hpp"
#include "core/failure_record.hpp"
#include "core/file_io.hpp"
#include "core/liveness.hpp"
#include "core/model/param_slice.hpp"

namespace st {
namespace {

namespace fs = std::filesystem;
constexpr const char* kManifest = "manifest.json";
constexpr const char* kComplete = "COMPLETE";

std::string step_dir_name(int64_t step) {
  return fmt::format("step-{:08}", step);
}

// An xxh64 state, reset, freed however its reading or writing ends (a failure throws).
using HashState = std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)>;
HashState new_hash() {
  HashState state(XXH64_createState(), XXH64_freeState);
  XXH64_reset(state.get(), 0);
  return state;
}

// Element offset of each unit's shard within a rank's file, for shards of `shard_numel`.
std::vector<int64_t> unit_file_offsets(const std::vector<int64_t>& shard_numel) {
  std::vector<int64_t> off(shard_numel.size() + 1, 0);
  for (size_t u = 0; u < shard_numel.size(); ++u) off[u + 1] = off[u] + shard_numel[u];
  return off;
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

namespace {

// Pipeline parallelism: the files are those of one pipeline stage's model group without stages
// (each holds its shard of every unit), written by pipeline rank 0's ranks; the other pipeline
// ranks send them the shards of the units they hold, state by state and unit by unit in file
// order. So a checkpoint is the same whatever pp it was written at, and loads at any.
// A background save passes its own copy of the pipeline group (the training's is busy with
// the step's messages) and its deadline: a wait past it aborts that group and throws.
class StageShards {
 public:
  StageShards(const FsdpRuntime& fsdp, const std::vector<ShardSpan>& spans,
              const std::vector<ShardedState>& states)
      : fsdp_(fsdp), spans_(spans), states_(states), pipeline_(fsdp.pipeline_group()) {}
  StageShards(const FsdpRuntime& fsdp, const std::vector<ShardSpan>& spans,
              const std::vector<ShardedState>& states, ProcessGroup* pipeline,
              std::chrono::steady_clock::time_point deadline)
      : fsdp_(fsdp),
        spans_(spans),
        states_(states),
        pipeline_(pipeline),
        deadline_(deadline),
        timeout_s_(0) {}

  // Whether unit `u` comes from another pipeline rank (on pipeline rank 0).
  bool foreign(size_t u) const { return pipeline_ && !fsdp_.holds(int(u)); }
  // Unit u's shard of state s, received from its owner.
  const float* receive(size_t s, size_t u) {
    received_.insert({s, u});
    buffer_ = Tensor::empty("checkpoint.stage_shard", {fsdp_.units()[u].shard_numel}, DType::f32);
    await(pipeline_->recv(buffer_, fsdp_.unit_owner(int(u)), options(s, u)));
    return buffer_.data<float>();
  }
  // On pipeline rank 0 after a failed write: receives what the other stages still send (into
  // nothing), so their senders reach the outcome's agreement now rather than at the deadline.
  void drain() {
    for (size_t s = 0; s < states_.size(); ++s)
      for (size_t u = 0; u < fsdp_.units().size(); ++u)
        if (foreign(u) && !received_.count({s, u})) receive(s, u);
  }
  // On a pipeline rank other than 0: sends every unit it owns, in file order.
  void send_all() {
    for (size_t s = 0; s < states_.size(); ++s)
      for (size_t u = 0; u < fsdp_.units().size(); ++u) {
        if (!fsdp_.holds(int(u)) || fsdp_.unit_owner(int(u)) != pipeline_->rank()) continue;
        Tensor shard =
            Tensor::zeros("checkpoint.stage_shard", {fsdp_.units()[u].shard_numel}, DType::f32);
        for (size_t k = 0; k < spans_.size(); ++k)
          if (spans_[k].unit == int(u))
            std::memcpy(shard.data<float>() + spans_[k].shard_offset, states_[s].spans[k].raw(),
                        states_[s].spans[k].nbytes());
        await(pipeline_->send(shard, 0, options(s, u)));
      }
  }

 private:
  P2POptions options(size_t s, size_t u) const {
    P2POptions o{.tag = tag(s, u)};
    if (timeout_s_) o.timeout_s = *timeout_s_;
    return o;
  }
  void await(const std::shared_ptr<Work>& work) {
    if (!deadline_) return work->wait();
    const double left =
        std::chrono::duration<double>(*deadline_ - std::chrono::steady_clock::now()).count();
    if (work->wait_for(left)) return;
    pipeline_->abort("a background save's stage shards passed its deadline");
    fail("the background save's stage shards did not arrive within checkpoint.async_timeout");
  }
  int tag(size_t s, size_t u) const {
    const size_t t = s * fsdp_.units().size() + u;
    ST_CHECK(t <= size_t(kMaxTag), "checkpoint: {} states x {} units exceed the message tags",
             states_.size(), fsdp_.units().size());
    return int(t);
  }
  const FsdpRuntime& fsdp_;
  const std::vector<ShardSpan>& spans_;
  const std::vector<ShardedState>& states_;
  ProcessGroup* pipeline_;
  std::optional<std::chrono::steady_clock::time_point> deadline_;
  std::optional<double> timeout_s_;               // 0: no watchdog (the deadline bounds the waits)
  std::set<std::pair<size_t, size_t>> received_;  // (state, unit)
  Tensor buffer_;
};

// Writes this rank's file of each state into `dir`: per state, each unit's shard in unit
// order, spans where they lie (no copy), the shard's tail padding as zeros (units of other
// pipeline stages as `stages` receives them). Returns per state {bytes, xxh64} as u64
// [2 * states].
Tensor write_rank_files(const fs::path& dir, int rank, const std::vector<UnitLayout>& units,
                        const std::vector<ShardSpan>& spans,
                        const std::vector<ShardedState>& states, const SaveOptions& options,
                        StageShards& stages) {
  const size_t n = states.size();
  Tensor sums = Tensor::zeros("checkpoint.sums", {int64_t(2 * n)}, DType::u64);
  static const std::vector<float> zeros(4096, 0.f);
  for (size_t s = 0; s < n; ++s) {
    OutputFile out((dir / checkpoint_file_name(states[s].name, rank)).string());
    const HashState state = new_hash();
    XXH64_state_t* hash = state.get();
    uint64_t bytes = 0;
    auto put = [&](const void* data, size_t len) {
      out.write(data, len);
      XXH64_update(hash, data, len);
      bytes += len;
    };
    size_t k = 0;
    for (size_t u = 0; u < units.size(); ++u) {
      if (stages.foreign(u)) {
        put(stages.receive(s, u), size_t(units[u].shard_numel) * sizeof(float));
        continue;
      }
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
      if (options.slow_ms_per_unit > 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(options.slow_ms_per_unit));
      if (std::chrono::steady_clock::now() > options.deadline)
        fail("writing '{}': given up at the save's deadline (checkpoint.async_timeout)",
             (dir / checkpoint_file_name(states[s].name, rank)).string());
    }
    out.sync_and_close();
    sums.data<uint64_t>()[2 * s] = bytes;
    sums.data<uint64_t>()[2 * s + 1] = XXH64_digest(hash);
  }
  return sums;
}

// The manifest: step, world, caller's meta, the layout, and every file's size and checksum
// (`all_sums`: write_rank_files' sums of every rank, rank after rank).
CheckpointManifest make_manifest(int64_t step, int world, const nlohmann::json& meta,
                                 const FsdpRuntime& fsdp, const std::vector<ShardedState>& states,
                                 const Tensor& all_sums) {
  CheckpointManifest m;
  m.step = step;
  m.world_size = world;
  m.tp = fsdp.tp();
  m.meta = meta;
  for (const ShardedState& s : states) m.states.push_back(s.name);
  const auto& specs = fsdp.model().param_specs();
  for (const UnitLayout& u : fsdp.units()) {
    m.units.push_back({u.name, u.numel, u.shard_numel});
    for (size_t k = 0; k < u.params.size(); ++k) {
      const ParamSpec& spec = specs[u.params[k]];
      m.params.push_back({spec.name, spec.whole_shape(), u.unit, u.flat_offsets[k],
                          spec.sliced() ? spec.placement : Placement{}});
    }
  }
  const size_t n = states.size();
  const uint64_t* v = all_sums.data<uint64_t>();
  for (int r = 0; r < world; ++r)
    for (size_t s = 0; s < n; ++s) {
      const uint64_t* sum = v + (size_t(r) * n + s) * 2;
      m.files.push_back({checkpoint_file_name(states[s].name, r), states[s].name, r,
                         int64_t(sum[0]), fmt::format("{:016x}", sum[1])});
    }
  return m;
}

// Rank 0, after every file is written: the manifest, then the atomic rename, then the
// COMPLETE marker, then only the newest `keep` complete checkpoints remain.
void publish(const fs::path& root, const fs::path& tmp_dir, const fs::path& final_dir,
             const CheckpointManifest& manifest, const SaveOptions& options) {
  write_text_file((tmp_dir / kManifest).string(), manifest_text(manifest));
  sync_directory(tmp_dir.string());
  // Replace an existing checkpoint of the same step only once the new one is whole.
  const fs::path old_dir = root / fmt::format(".{}.old", final_dir.filename().string());
  fs::remove_all(old_dir);
  if (fs::exists(final_dir)) fs::rename(final_dir, old_dir);
  fs::rename(tmp_dir, final_dir);
  sync_directory(root.string());
  write_text_file((final_dir / kComplete).string(), "complete\n");
  sync_directory(final_dir.string());
  if (options.on_complete) options.on_complete(final_dir.string());
  fs::remove_all(old_dir);
  const std::vector<std::string> complete = complete_checkpoints(root.string());
  for (size_t i = 0; i + size_t(options.keep) < complete.size(); ++i) fs::remove_all(complete[i]);
}

}  // namespace

namespace {

// Up to 2 s (a datagram takes well under a millisecond; a loaded machine may delay the thread
// that receives it), returning as soon as a peer's notice is in.
void wait_for_peer_failure_notice() {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!liveness::peer_failed() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

}  // namespace

std::string checkpoint_path(const std::string& root, int64_t step) {
  return (fs::path(root) / step_dir_name(step)).string();
}

std::string save_checkpoint(const std::string& root, int64_t step, const nlohmann::json& meta,
                            FsdpRuntime& fsdp, const std::vector<ShardedState>& states,
                            const SaveOptions& options) {
  ProcessGroup& group = fsdp.model_group();  // one copy of the model: dp_shard x tp
  const int rank = group.rank(), world = group.size();
  const std::vector<ShardSpan> spans = fsdp.spans();
  check_states(states, spans);
  const fs::path final_dir = fs::path(root) / step_dir_name(step);
  StageShards stages(fsdp, spans, states);
  ProcessGroup* pipeline = fsdp.pipeline_group();
  if (pipeline && pipeline->rank() != 0) {
    stages.send_all();
    pipeline->barrier()->wait();  // pipeline rank 0 has published it
    return final_dir.string();
  }
  const fs::path tmp_dir = fs::path(root) / fmt::format(".{}.tmp", step_dir_name(step));
  if (rank == 0) {
    fs::create_directories(root);
    fs::remove_all(tmp_dir);  // a crashed earlier attempt
    fs::create_directory(tmp_dir);
  }
  group.barrier()->wait();
  try {
    const Tensor sums =
        write_rank_files(tmp_dir, rank, fsdp.units(), spans, states, options, stages);
    Tensor all = Tensor::empty("checkpoint.all_sums", {sums.numel() * world}, DType::u64);
    group.all_gather(sums, all)->wait();
    if (rank == 0)
      publish(root, tmp_dir, final_dir, make_manifest(step, world, meta, fsdp, states, all),
              options);
  } catch (...) {
    // A full disk or a failed write: the partial checkpoint goes, so it does not keep the disk
    // full until the next run; the previous checkpoints are untouched. The other ranks hear
    // first that this one ends the job, so the writes this removal breaks under them add no
    // second message. The directory is renamed before it is emptied: remove_all alone races
    // with a rank still creating files in it by its old path. What a killed rank leaves, the
    // next start-up removes (clean_interrupted_saves).
    // The temporary folder gone from under this rank means another rank failed first and
    // removed it: its failure is the cause and its notice (a datagram) may still be on the way;
    // wait for it (a little), so that this rank's "No such file" is not the message.
    std::error_code gone;
    if (!fs::exists(tmp_dir, gone)) wait_for_peer_failure_notice();
    announce_abort_to_peers();
    const fs::path doomed =
        fs::path(root) / fmt::format(".{}.rank-{}-failed.tmp", step_dir_name(step), rank);
    std::error_code ec;
    fs::rename(tmp_dir, doomed, ec);
    fs::remove_all(doomed, ec);
    throw;
  }
  group.barrier()->wait();
  if (pipeline) pipeline->barrier()->wait();
  return final_dir.string();
}

namespace {

// Every rank's slot of a background save's exchange: [ok, then per state its bytes and xxh64].
struct RankSlots {
  const int64_t* all;
  size_t slot;
  int world;
};

// Rank 0's part of a background save once every rank's files are durable: their checksums into
// the manifest, then the checkpoint published. Returns "" or what failed (its errno, for an I/O
// error, in `error`).
std::string publish_background_save(const std::string& root, const fs::path& tmp_dir,
                                    const fs::path& final_dir, int64_t step,
                                    const nlohmann::json& meta, const FsdpRuntime& fsdp,
                                    const std::vector<ShardedState>& states, RankSlots slots,
                                    const SaveOptions& options, int& error) {
  const size_t n = states.size();
  Tensor sums = Tensor::empty("checkpoint.all_sums", {int64_t(2 * n) * slots.world}, DType::u64);
  for (int r = 0; r < slots.world; ++r)
    std::memcpy(sums.data<uint64_t>() + 2 * n * size_t(r), slots.all + slots.slot * size_t(r) + 1,
                2 * n * sizeof(uint64_t));
  try {
    // options.on_complete runs here, on the writer thread, the moment the marker is durable.
    publish(root, tmp_dir, final_dir, make_manifest(step, slots.world, meta, fsdp, states, sums),
            options);
    return "";
  } catch (const std::exception& e) {
    classify_failure(e, error);
    return e.what();
  }
}

}  // namespace

BackgroundSave save_checkpoint_in_background(const std::string& root, int64_t step,
                                             const nlohmann::json& meta, const FsdpRuntime& fsdp,
                                             const std::vector<ShardSpan>& spans,
                                             const std::vector<ShardedState>& states,
                                             ProcessGroup& commit, ProcessGroup* stages,
                                             const SaveOptions& options) {
  const int rank = commit.rank(), world = commit.size();
  // Under pipeline stages, pipeline rank 0's ranks (commit's first `files`) write every file.
  const int files = world / (stages ? stages->size() : 1);
  const bool writes = !stages || stages->rank() == 0;
  ST_CHECK(writes == (rank < files), "commit rank {} of {}: {} the files of {}", rank, world,
           writes ? "writes" : "does not write", files);
  check_states(states, spans);
  const fs::path final_dir = fs::path(root) / step_dir_name(step);
  const fs::path tmp_dir = fs::path(root) / fmt::format(".{}.tmp", step_dir_name(step));
  BackgroundSave result;
  result.step = step;
  result.path = final_dir.string();
  // Waits for `work` until the deadline; past it the group is aborted, so every later step of
  // this save (here and on the ranks still waiting) ends at once.
  auto finished = [&](const std::shared_ptr<Work>& work) {
    const double left =
        std::chrono::duration<double>(options.deadline - std::chrono::steady_clock::now()).count();
    try {
      if (work->wait_for(left)) return true;
      commit.abort(fmt::format("the background save of step {} passed its deadline", step));
      result.message =
          fmt::format("the ranks did not all finish their files within checkpoint.async_timeout");
    } catch (const std::exception& e) {
      result.message = e.what();
    }
    result.outcome = BackgroundSave::Outcome::abandoned;
    return false;
  };
  // Every rank's slot: [ok, then per state its bytes and xxh64], summed over the ranks.
  const size_t n = states.size(), slot = 1 + 2 * n;
  Tensor exchange = Tensor::zeros("checkpoint.exchange", {int64_t(slot) * world}, DType::i64);
  int64_t* mine = exchange.data<int64_t>() + slot * size_t(rank);
  std::string error;
  StageShards shards(fsdp, spans, states, stages, options.deadline);
  try {
    if (writes) {
      std::error_code ec;
      fs::create_directories(tmp_dir, ec);  // every writer: whichever comes first makes it
      if (ec) fail("creating '{}': {}", tmp_dir.string(), ec.message());
      const Tensor sums =
          write_rank_files(tmp_dir, rank, fsdp.units(), spans, states, options, shards);
      std::memcpy(mine + 1, sums.raw(), sums.nbytes());
    } else {
      shards.send_all();  // to pipeline rank 0, which writes them into its files
    }
    mine[0] = 1;
  } catch (const std::exception& e) {
    error = e.what();
    classify_failure(e, result.error);  // ENOSPC stays ENOSPC in the failure record
    if (stages && writes) {
      try {
        shards.drain();
      } catch (const std::exception&) {
        // Past the deadline: the agreement below says abandoned.
      }
    }
  }
  AllReduceOptions no_watchdog;
  no_watchdog.timeout_s = 0;  // the deadline above bounds the wait instead
  if (!finished(commit.all_reduce(exchange, no_watchdog))) return result;
  const int64_t* all = exchange.data<int64_t>();
  for (int r = 0; r < world; ++r)
    if (all[slot * size_t(r)] != 1) result.failed_ranks.push_back(r);
  if (!result.failed_ranks.empty()) {
    result.outcome = std::chrono::steady_clock::now() > options.deadline
                         ? BackgroundSave::Outcome::abandoned
                         : BackgroundSave::Outcome::failed;
    result.message = error;
    result.lowest_failed = result.failed_ranks.front() == rank;
    return result;
  }
  Tensor published = Tensor::zeros("checkpoint.published", {1}, DType::i64);
  if (rank == 0) {
    error = publish_background_save(root, tmp_dir, final_dir, step, meta, fsdp, states,
                                    {all, slot, files}, options, result.error);
    published.data<int64_t>()[0] = error.empty() ? 1 : 0;
  }
  if (!finished(commit.all_reduce(published, no_watchdog))) return result;
  if (published.data<int64_t>()[0] != 1) {
    result.outcome = BackgroundSave::Outcome::failed;
    result.failed_ranks = {0};
    result.message = error;
    result.lowest_failed = rank == 0;
    return result;
  }
  result.outcome = BackgroundSave::Outcome::complete;
  return result;
}

bool remove_unfinished_save(const std::string& root, int64_t step) {
  const fs::path tmp_dir = fs::path(root) / fmt::format(".{}.tmp", step_dir_name(step));
  std::error_code ec;
  if (!fs::exists(tmp_dir, ec)) return false;
  // Ranks whose writes failed may remove it at the same time: only what remains is an error.
  fs::remove_all(tmp_dir, ec);
  std::error_code still;
  if (ec && fs::exists(tmp_dir, still))
    fail("cannot remove '{}', left by a failed background save: {}", tmp_dir.string(),
         ec.message());
  return true;
}

std::vector<std::string> complete_checkpoints(const std::string& root) {
  std::vector<std::string> complete;
  if (root.empty() || !fs::is_directory(root)) return complete;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory() && e.path().filename().string().rfind("step-", 0) == 0 &&
        fs::exists(e.path() / kComplete))
      complete.push_back(e.path().string());
  std::sort(complete.begin(), complete.end());
  return complete;
}

std::vector<std::string> clean_interrupted_saves(const std::string& root) {
  std::vector<std::string> done;
  if (root.empty() || !fs::is_directory(root)) return done;
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(root)) {
    const std::string name = e.path().filename().string();
    const bool tmp = name.ends_with(".tmp"), old = name.ends_with(".old");
    if (e.is_directory() && name.rfind(".step-", 0) == 0 && (tmp || old)) found.push_back(e.path());
  }
  std::sort(found.begin(), found.end());
  for (const fs::path& p : found) {
    const std::string name = p.filename().string();
    const std::string step = name.substr(1, name.find('.', 1) - 1);  // ".step-N.tmp" -> "step-N"
    if (name.ends_with(".old") && fs::exists(p / kComplete) &&
        !fs::exists(fs::path(root) / step / kComplete)) {
      fs::remove_all(fs::path(root) / step);
      fs::rename(p, fs::path(root) / step);
      done.push_back(fmt::format("restored {} (its replacement was interrupted)", step));
      continue;
    }
    std::error_code ec;
    const auto removed = fs::remove_all(p, ec);
    if (ec) fail("cannot remove '{}', left by an interrupted save: {}", p.string(), ec.message());
    done.push_back(fmt::format("removed {} ({} files of an interrupted save of {})", name,
                               removed ? removed - 1 : 0, step));
  }
  return done;
}

std::vector<std::string> skipped_incomplete_checkpoints(const std::string& root) {
  std::vector<std::string> skipped;
  if (root.empty() || !fs::is_directory(root)) return skipped;
  const std::string newest = latest_checkpoint(root);
  for (const auto& e : fs::directory_iterator(root)) {
    const std::string name = e.path().filename().string();
    if (e.is_directory() && name.rfind("step-", 0) == 0 && !fs::exists(e.path() / kComplete) &&
        e.path().string() > newest)
      skipped.push_back(
          fmt::format("{} (no {} marker: its save did not finish)", e.path().string(), kComplete));
  }
  std::sort(skipped.begin(), skipped.end());
  return skipped;
}

std::string latest_checkpoint(const std::string& root) {
  const std::vector<std::string> complete = complete_checkpoints(root);
  return complete.empty() ? std::string() : complete.back();
}

CheckpointInfo read_checkpoint_info(const std::string& path) {
  const fs::path dir(path);
  const std::string manifest_path = (dir / kManifest).string();
  if (!fs::is_directory(dir)) fail_input("checkpoint '{}' is not a directory", path);
  if (!fs::exists(dir / kComplete)) {
    const std::string newest = latest_checkpoint(path);
    if (!newest.empty())
      fail_input("'{}' holds checkpoints rather than being one; the newest complete one is '{}'",
                 path, newest);
    fail_input("checkpoint '{}' has no {} marker: it was not completely written", path, kComplete);
  }
  CheckpointInfo info;
  static_cast<CheckpointManifest&>(info) = parse_checkpoint_manifest(
      read_regular_text_file(manifest_path), fmt::format("'{}'", manifest_path));
  info.path = path;
  return info;
}

void check_checkpoint_layout(const CheckpointInfo& info, const FsdpRuntime& fsdp) {
  check_manifest_layout(info, fsdp.units(), fsdp.model().param_specs(),
                        fmt::format("'{}'", (fs::path(info.path) / kManifest).string()));
}

namespace {

enum class FileStatus : int64_t { ok, missing, wrong_size, bad_checksum };

FileStatus check_file(const std::string& path, const ManifestFile& entry) {
  if (!fs::exists(path)) return FileStatus::missing;
  InputFile f(path);
  const int64_t file_bytes = entry.bytes;
  if (f.size() != file_bytes) return FileStatus::wrong_size;
  const HashState state = new_hash();
  XXH64_state_t* hash = state.get();
  std::vector<char> buf(size_t(8) << 20);
  for (int64_t off = 0; off < file_bytes; off += int64_t(buf.size())) {
    const size_t len = size_t(std::min<int64_t>(int64_t(buf.size()), file_bytes - off));
    f.read_at(buf.data(), len, off);
    XXH64_update(hash, buf.data(), len);
  }
  const bool good = fmt::format("{:016x}", XXH64_digest(hash)) == entry.xxh64;
  return good ? FileStatus::ok : FileStatus::bad_checksum;
}

// Verifies every file's size and checksum before any is used; file i is read by rank
// i % world, and one integer max all-reduce tells every rank every file's status.
void verify_files(const CheckpointInfo& info, ProcessGroup& group) {
  const auto& files = info.files;
  const fs::path dir(info.path);
  Tensor status = Tensor::zeros("checkpoint.status", {int64_t(files.size())}, DType::i64);
  run_agreed(group, [&] {  // an unreadable file fails on its reader alone
    for (size_t i = size_t(group.rank()); i < files.size(); i += size_t(group.size()))
      status.data<int64_t>()[i] = int64_t(check_file((dir / files[i].file).string(), files[i]));
  });
  group.all_reduce(status, {.op = ReduceOp::max})->wait();
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string path = (dir / files[i].file).string();
    switch (FileStatus(status.data<int64_t>()[i])) {
      case FileStatus::ok:
        break;
      case FileStatus::missing:
        fail_input("checkpoint file '{}' is missing", path);
      case FileStatus::wrong_size:
        fail_input(
            "checkpoint file '{}' has the wrong size (expected {} bytes): truncated or "
            "not from this checkpoint",
            path, files[i].bytes);
      case FileStatus::bad_checksum:
        fail_input("checkpoint file '{}' fails its xxh64 checksum: it is corrupt", path);
    }
  }
}

// Reads of one state's files, coalesced: consecutive pieces of one file that land next to each
// other become one read.
class PieceReader {
 public:
  PieceReader(const CheckpointInfo& info, const std::string& state)
      : info_(info), state_(state), files_(size_t(info.world_size)) {}
  // `n` floats of rank `file_rank`'s file at element `at`, into `dst`.
  void add(int file_rank, int64_t at, float* dst, int64_t n) {
    if (n_ > 0 && file_rank == rank_ && at == at_ + n_ && dst == dst_ + n_) {
      n_ += n;
      return;
    }
    flush();
    rank_ = file_rank, at_ = at, dst_ = dst, n_ = n;
  }
  void flush() {
    if (n_ == 0) return;
    std::unique_ptr<InputFile>& f = files_[size_t(rank_)];
    if (!f)
      f = std::make_unique<InputFile>(
          (fs::path(info_.path) / checkpoint_file_name(state_, rank_)).string());
    f->read_at(dst_, size_t(n_) * sizeof(float), at_ * int64_t(sizeof(float)));
    n_ = 0;
  }

 private:
  const CheckpointInfo& info_;
  const std::string& state_;
  std::vector<std::unique_ptr<InputFile>> files_;
  int rank_ = 0;
  int64_t at_ = 0, n_ = 0;
  float* dst_ = nullptr;
};

// Fills `state`'s spans with this rank's shard `shard_index` of each unit (of its TP slices, as
// `specs` say), reading only what it needs of the saved files: each element is found by its
// place in the whole parameter (SliceMap), then in the saved run's slices (slice_place), units
// and shards. Any mesh loads any other's checkpoint; with the same TP degree the reads are
// whole shard ranges.
void read_state(const CheckpointInfo& info, const ShardedState& state, int shard_index,
                const FsdpRuntime& fsdp, const std::vector<ShardSpan>& spans) {
  const std::vector<UnitLayout>& units = fsdp.units();
  const std::vector<ParamSpec>& specs = fsdp.model().param_specs();
  const std::vector<int64_t> old_shard = [&] {
    std::vector<int64_t> v;
    for (const ManifestUnit& u : info.units) v.push_back(u.shard_numel);
    return v;
  }();
  const std::vector<int64_t> old_off = unit_file_offsets(old_shard);
  PieceReader reader(info, state.name);
  size_t k = 0, saved_param = 0;
  for (size_t u = 0; u < units.size(); ++u) {
    if (!fsdp.holds(int(u))) {  // another pipeline stage's
      saved_param += units[u].params.size();
      continue;
    }
    const int64_t S = units[u].shard_numel, So = old_shard[u];
    const int64_t lo = int64_t(shard_index) * S, hi = std::min(units[u].numel, lo + S);
    std::vector<float> shard(size_t(S), 0.f);
    for (size_t j = 0; j < units[u].params.size(); ++j, ++saved_param) {
      const ParamSpec& spec = specs[units[u].params[j]];
      const ManifestParam& saved = info.params[saved_param];
      const int64_t f = units[u].flat_offsets[j];
      const int64_t a = std::max(lo, f) - f, b = std::min(hi, f + spec.numel()) - f;
      const SliceMap mine(spec);
      for (int64_t i = a; i < b;) {
        // Local elements [i, i + n) are whole elements [g, g + n): the rest of a run of mine.
        const int64_t g = mine.global(i);
        int64_t n = std::min(b - i, mine.run() - i % mine.run());
        const SlicePlace there = slice_place(saved.shape, saved.placement, info.tp, g);
        n = std::min(n, there.run);
        const int64_t flat = saved.flat_offset + there.local;  // in the saved unit
        const int64_t q = flat / So;
        n = std::min(n, (q + 1) * So - flat);
        reader.add(int(q) * info.tp + there.rank, old_off[u] + flat - q * So,
                   shard.data() + (f + i - lo), n);
        i += n;
      }
    }
    reader.flush();
    for (int64_t i = 0; i < hi - lo; ++i)
      if (!std::isfinite(shard[size_t(i)]))
        fail_input(
            "checkpoint '{}': state '{}' of unit '{}' holds a non-finite value ({}) at "
            "element {}",
            info.path, state.name, units[u].name, shard[size_t(i)], lo + i);
    for (; k < spans.size() && spans[k].unit == int(u); ++k)
      std::copy_n(shard.data() + spans[k].shard_offset, spans[k].master.numel(),
                  state.spans[k].data<float>());
  }
}

}  // namespace

void load_checkpoint(const CheckpointInfo& info, FsdpRuntime& fsdp,
                     const std::vector<ShardedState>& states) {
  ProcessGroup& group = fsdp.model_group();
  const std::vector<ShardSpan> spans = fsdp.spans();
  check_states(states, spans);
  const std::vector<std::string>& state_names = info.states;
  for (const ShardedState& s : states)
    if (std::find(state_names.begin(), state_names.end(), s.name) == state_names.end())
      fail_input("checkpoint '{}' holds no '{}' state (it has {})", info.path, s.name,
                 nlohmann::json(state_names).dump());
  verify_files(info, group);
  // A non-finite value or a failed read is found by one rank; every rank reports it.
  run_agreed(group, [&] {
    for (const ShardedState& state : states)
      read_state(info, state, fsdp.group().rank(), fsdp, spans);
  });
}

}  // namespace st
