#include "launch/elastic.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "parallel/fsdp/fsdp_runtime.hpp"
#include "parallel/mesh_layout.hpp"

namespace st {
namespace {

// A whole non-negative number in [0, max] from `variable`'s text.
int64_t parse_count(const std::string& text, const char* variable, int64_t max) {
  size_t used = 0;
  long long value = -1;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || value < 0 || value > max)
    fail_input("{} = '{}' must be a whole number in [0, {}] (set by launch/shardrun)", variable,
               text, max);
  return value;
}

std::string environment(const char* variable) {
  const char* value = std::getenv(variable);
  return value ? value : "";
}

}  // namespace

std::optional<RestartNotice> restart_notice_from_environment() {
  const std::string restart = environment("SHARDRUN_RESTART");
  if (restart.empty()) return std::nullopt;
  const size_t slash = restart.find('/');
  if (slash == std::string::npos)
    fail_input("SHARDRUN_RESTART = '{}' must be K/N (restart K of at most N)", restart);
  RestartNotice n;
  n.number = parse_count(restart.substr(0, slash), "SHARDRUN_RESTART", 1000000);
  n.limit = parse_count(restart.substr(slash + 1), "SHARDRUN_RESTART", 1000000);
  if (n.number < 1 || n.number > n.limit)
    fail_input("SHARDRUN_RESTART = '{}' must be K/N with 1 <= K <= N", restart);
  n.ranks_before =
      parse_count(environment("SHARDRUN_RESTART_RANKS"), "SHARDRUN_RESTART_RANKS", 1 << 20);
  n.failed_after_step =
      parse_count(environment("SHARDRUN_RESTART_STEP"), "SHARDRUN_RESTART_STEP", int64_t(1) << 40);
  n.reason = environment("SHARDRUN_RESTART_REASON");
  if (n.reason.empty()) n.reason = "the job failed (no message)";
  return n;
}

std::vector<int64_t> injected_kills_from_environment(int world_rank) {
  std::vector<int64_t> steps;
  std::istringstream in(environment("SHARDRUN_FAULT_KILL"));
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t at = item.find('@');
    if (at == std::string::npos)
      fail_input("SHARDRUN_FAULT_KILL = '{}' must be RANK@STEP[,RANK@STEP...]", item);
    const int64_t rank = parse_count(item.substr(0, at), "SHARDRUN_FAULT_KILL", 1 << 20);
    const int64_t step = parse_count(item.substr(at + 1), "SHARDRUN_FAULT_KILL", int64_t(1) << 40);
    if (rank == world_rank) steps.push_back(step);
  }
  return steps;
}

std::vector<int64_t> injected_holds_from_environment() {
  std::vector<int64_t> steps;
  std::istringstream in(environment("SHARDRUN_FAULT_HOLD"));
  std::string item;
  while (std::getline(in, item, ','))
    steps.push_back(parse_count(item, "SHARDRUN_FAULT_HOLD", int64_t(1) << 40));
  return steps;
}

namespace {

// The mesh the config asks for at `world_size`, fitted: the shard group's size kept where it
// divides the ranks, else the replicas' count, else FSDP over all. Returns what changed.
std::string fit_mesh(Config& c, int world_size) {
  try {
    mesh_shape(c, world_size);
    return "";
  } catch (const InputError&) {
  }
  const int64_t shard = c.parallel.dp_shard, replicate = c.parallel.dp_replicate;
  // The TP and pipeline degrees stay (they fix each rank's slices and the stages, and the
  // schedule's micro-batches were checked against them); the data-parallel ranks are the rest.
  const int64_t tp = c.parallel.tp > 1 ? c.parallel.tp : 1;
  const int64_t pp = c.parallel.pp > 1 ? c.parallel.pp : 1;
  if (world_size % (tp * pp) != 0) return "";  // no mesh keeps them: the world is not runnable
  const int64_t data = world_size / (tp * pp);
  if (shard > 0 && data % shard == 0) {
    c.parallel.dp_replicate = data / shard;
  } else if (replicate > 0 && data % replicate == 0) {
    c.parallel.dp_shard = data / replicate;
  } else {
    c.parallel.dp_shard = data;
    c.parallel.dp_replicate = 1;
  }
  return fmt::format(
      "parallel.dp_shard = {} x dp_replicate = {} does not fit {} ranks: {} x {} instead. ", shard,
      replicate, world_size, c.parallel.dp_shard, c.parallel.dp_replicate);
}

// Each rank's node at the restart: blocks of ranks_per_node where the config emulates nodes, else
// the detected map (empty when not known yet: the first run's guess at a restart's hosts).
std::vector<int> restart_nodes(const Config& c, int world_size, const std::vector<int>& detected) {
  if (c.sharding.ranks_per_node > 0) {
    std::vector<int> nodes(static_cast<size_t>(world_size));
    for (int r = 0; r < world_size; ++r)
      nodes[size_t(r)] = block_of(r, int(c.sharding.ranks_per_node));
    return nodes;
  }
  return int(detected.size()) == world_size ? detected : std::vector<int>{};
}

// `nodes` renumbered in order of first appearance: groups laid out alike compare equal.
std::vector<int> relabelled(const std::vector<int>& nodes) {
  std::map<int, int> label;
  std::vector<int> out;
  for (int n : nodes) out.push_back(label.emplace(n, int(label.size())).first->second);
  return out;
}

// Each group's layout as an index into `layouts`, the distinct layouts (nodes relabelled).
std::vector<size_t> layout_ids(const std::vector<std::vector<int>>& groups,
                               std::vector<std::vector<int>>& layouts) {
  std::map<std::vector<int>, size_t> seen;
  std::vector<size_t> ids;
  for (const auto& g : groups) {
    auto [it, added] = seen.emplace(relabelled(g), layouts.size());
    if (added) layouts.push_back(g);
    ids.push_back(it->second);
  }
  return ids;
}

// Whether plan_quantization accepts every rank's shard and replica groups on `nodes`; each
// distinct pair of group layouts is judged once (meshes repeat one layout).
bool quantization_applies(const Config& c, const MeshShape& shape, const std::vector<int>& nodes) {
  const MeshDims shard_dim{MeshDim::dp_shard}, replica_dim{MeshDim::dp_replicate};
  std::vector<std::vector<int>> shards(size_t(shape.world() / shape.dp_shard)),
      replicas(size_t(shape.world() / shape.dp_replicate));
  for (int r = 0; r < shape.world(); ++r) {  // ascending: each group's members in order
    shards[size_t(group_index(shape, r, shard_dim))].push_back(nodes[size_t(r)]);
    if (shape.dp_replicate > 1)
      replicas[size_t(group_index(shape, r, replica_dim))].push_back(nodes[size_t(r)]);
  }
  std::vector<std::vector<int>> shard_layouts, replica_layouts;
  const auto shard_id = layout_ids(shards, shard_layouts);
  const auto replica_id = layout_ids(replicas, replica_layouts);
  std::set<std::pair<size_t, size_t>> judged;
  for (int r = 0; r < shape.world(); ++r) {
    const size_t s = shard_id[size_t(group_index(shape, r, shard_dim))],
                 p = replica_id[size_t(group_index(shape, r, replica_dim))];
    if (!judged.emplace(s, p).second) continue;
    try {
      plan_quantization(c.sharding.gather_quantization, c.sharding.reduce_quantization,
                        shard_layouts[s], replica_layouts[p]);
    } catch (const InputError&) {
      return false;
    }
  }
  return true;
}

// Options that shape the collectives and cannot apply on the restart's mesh are dropped (they
// change memory or traffic, never what a step computes on one node), each named.
std::string drop_options_that_cannot_apply(Config& c, int world_size,
                                           const std::vector<int>& nodes) {
  const MeshShape shape = mesh_shape(c, world_size);
  std::string changes;
  if (c.sharding.reshard_to != 0) {
    try {
      check_reshard_to(int(c.sharding.reshard_to), shape.dp_shard);
    } catch (const InputError&) {
      changes += fmt::format(
          "sharding.reshard_after_forward = {} does not divide a shard group of {}: true. ",
          c.sharding.reshard_to, shape.dp_shard);
      c.sharding.reshard_to = 0;
      c.sharding.reshard_after_forward = true;
    }
  }
  const bool quantized = c.sharding.gather_quantization != Quantization::none ||
                         c.sharding.reduce_quantization != Quantization::none;
  if (quantized && !nodes.empty() && !quantization_applies(c, shape, nodes)) {
    changes += fmt::format(
        "sharding.gather_quantization = {}, reduce_quantization = {} have no link between nodes "
        "to quantize on {} ranks: none. ",
        quantization_name(c.sharding.gather_quantization),
        quantization_name(c.sharding.reduce_quantization), world_size);
    c.sharding.gather_quantization = Quantization::none;
    c.sharding.reduce_quantization = Quantization::none;
  }
  return changes;
}

}  // namespace

std::string adapt_config_to_restart(Config& c, int world_size,
                                    const std::vector<int>& detected_nodes) {
  std::string changes;
  if (!c.checkpoint.resume.newest() && !c.checkpoint.dir.empty()) {
    changes = fmt::format("checkpoint.resume = {} becomes auto (the newest complete checkpoint). ",
                          c.checkpoint.resume.name());
    c.checkpoint.resume = ResumeFrom{};  // the newest
  }
  if (c.sharding.ranks_per_node > 0 && world_size % c.sharding.ranks_per_node != 0) {
    changes += fmt::format("sharding.ranks_per_node = {} does not divide {} ranks: detected. ",
                           c.sharding.ranks_per_node, world_size);
    c.sharding.ranks_per_node = 0;
  }
  changes += fit_mesh(c, world_size);
  changes +=
      drop_options_that_cannot_apply(c, world_size, restart_nodes(c, world_size, detected_nodes));
  while (!changes.empty() && changes.back() == ' ') changes.pop_back();
  return changes;
}

RunnableWorldSizes runnable_world_sizes(const Config& config, int world_size) {
  RunnableWorldSizes sizes;
  sizes.world_size = world_size;
  for (int w = 1; w <= world_size; ++w) {
    Config c = config;
    try {
      adapt_config_to_restart(c, w);
      validate_config(c);
      validate_for_world(c, w);
      sizes.runnable.push_back(w);
    } catch (const InputError& e) {
      if (w > world_size - 64) sizes.refused_why[w] = e.what();
    }
  }
  return sizes;
}

std::string runnable_world_sizes_json(const RunnableWorldSizes& sizes) {
  nlohmann::json refused = nlohmann::json::object();
  for (const auto& [w, why] : sizes.refused_why) refused[std::to_string(w)] = why;
  return nlohmann::json{
      {"world_size", sizes.world_size}, {"runnable", sizes.runnable}, {"refused", refused}}
      .dump();
}

void write_runnable_world_sizes(const Config& config, int world_size) {
  const std::string path = environment("SHARDRUN_WORLD_SIZES");
  // The first run's, at the job's full size, serves every restart (which runs on fewer ranks
  // with the same config).
  std::error_code ec;
  if (path.empty() || std::filesystem::exists(path, ec)) return;
  // Advisory: without the file shardrun restarts at every rank that remains, as before.
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << runnable_world_sizes_json(runnable_world_sizes(config, world_size)) << "\n";
    if (!out.flush()) return;
  }
  std::rename(temporary.c_str(), path.c_str());
}

std::string restart_line(const RestartNotice& n, const std::string& checkpoint,
                         int64_t resumed_after_step, int world_size, const std::string& mesh,
                         const std::string& changes) {
  const std::string from = checkpoint.empty()
                               ? std::string("no checkpoint: from step 0")
                               : fmt::format("from {} (step {})", checkpoint, resumed_after_step);
  const int64_t recomputed = std::max<int64_t>(0, n.failed_after_step - resumed_after_step);
  std::string line =
      fmt::format("restart {} of {} | why: {} | {}; {} step{} recomputed | {} rank{} (was {}), {}",
                  n.number, n.limit, n.reason, from, recomputed, recomputed == 1 ? "" : "s",
                  world_size, world_size == 1 ? "" : "s", n.ranks_before, mesh);
  if (!changes.empty()) line += " | " + changes;
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

std::vector<std::string> metrics_lines_to_keep(const std::string& earlier, int64_t steps_done) {
  std::vector<std::string> kept;
  std::istringstream in(earlier);
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) continue;
    auto number_at = [&](const char* key) -> std::optional<double> {
      auto it = j.find(key);
      if (it == j.end() || !it->is_number()) return std::nullopt;
      return it->get<double>();
    };
    if (auto step = number_at("step")) {
      if (*step < double(steps_done)) kept.push_back(line);
    } else if (auto after = number_at("after_step")) {
      if (*after <= double(steps_done)) kept.push_back(line);
    }
  }
  return kept;
}

}  // namespace st
