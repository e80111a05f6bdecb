#include "launch/cluster_config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <toml++/toml.h>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>

#include "core/error.hpp"
#include "core/file_io.hpp"
#include "launch/bundled_configs.hpp"
#include "launch/names.hpp"

namespace st {
namespace {

constexpr double kGbit = 1e9 / 8;  // bytes/s per Gbit/s
constexpr int kMaxNodes = 1 << 20;

struct ClusterKey {
  bool integer;  // else a number (or, for the few string keys, a string)
  bool text;
  std::function<void(ClusterSpec&, double, const std::string&)> set;
};

const std::map<std::string, ClusterKey>& cluster_keys() {
  static const std::map<std::string, ClusterKey> keys = {
      {"name", {false, true, nullptr}},
      {"nodes",
       {true, false, [](ClusterSpec& c, double v, const std::string&) { c.nodes = int(v); }}},
      {"ranks_per_node",
       {true, false,
        [](ClusterSpec& c, double v, const std::string&) { c.ranks_per_node = int(v); }}},
      {"threads_per_rank",
       {true, false,
        [](ClusterSpec& c, double v, const std::string&) { c.threads_per_rank = int(v); }}},
      {"cores_per_node",
       {true, false,
        [](ClusterSpec& c, double v, const std::string&) { c.cores_per_node = int(v); }}},
      {"nodes_per_machine",
       {true, false,
        [](ClusterSpec& c, double v, const std::string&) { c.nodes_per_machine = int(v); }}},
      {"memory_gib",
       {false, false,
        [](ClusterSpec& c, double v, const std::string&) {
          c.memory_per_node = v * 1073741824.0;
        }}},
      {"compute.profile", {false, true, nullptr}},
      {"compute.matmul_gflops",
       {false, false,
        [](ClusterSpec& c, double v, const std::string&) { c.matmul_flops = v * 1e9; }}},
      {"compute.memory_gbps",
       {false, false,
        [](ClusterSpec& c, double v, const std::string&) { c.memory_bandwidth = v * 1e9; }}},
      {"compute.matmul_efficiency",
       {false, false,
        [](ClusterSpec& c, double v, const std::string&) { c.matmul_efficiency = v; }}},
      {"compute.memory_efficiency",
       {false, false,
        [](ClusterSpec& c, double v, const std::string&) { c.memory_efficiency = v; }}},
      {"calibration.config", {false, true, nullptr}},
      {"calibration.overrides", {false, true, nullptr}},
      {"calibration.mesh", {false, true, nullptr}},
      {"calibration.source", {false, true, nullptr}},
      {"calibration.ranks",
       {true, false,
        [](ClusterSpec& c, double v, const std::string&) {
          c.calibration.ranks = int(v);
          c.has_calibration = true;
        }}},
      {"calibration.tokens_per_s_per_rank",
       {false, false,
        [](ClusterSpec& c, double v, const std::string&) {
          c.calibration.tokens_per_s_per_rank = v;
          c.has_calibration = true;
        }}},
      {"intra_node.link", {false, true, nullptr}},
      {"intra_node.bandwidth_gbps",
       {false, false,
        [](ClusterSpec& c, double v, const std::string&) { c.intra.bandwidth = v * 1e9; }}},
      {"intra_node.latency_us",
       {false, false,
        [](ClusterSpec& c, double v, const std::string&) { c.intra.latency = v / 1e6; }}},
      {"inter_node.link", {false, true, nullptr}},
      {"inter_node.bandwidth_gbit",
       {false, false,
        [](ClusterSpec& c, double v, const std::string&) { c.inter.bandwidth = v * kGbit; }}},
      {"inter_node.nic", {false, true, nullptr}},
      {"inter_node.latency_us",
       {false, false,
        [](ClusterSpec& c, double v, const std::string&) { c.inter.latency = v / 1e6; }}},
      {"fabric.kind", {false, true, nullptr}},
      {"fabric.oversubscription",
       {false, false,
        [](ClusterSpec& c, double v, const std::string&) { c.oversubscription = v; }}},
  };
  return keys;
}

// A numeric key's valid values: [lo, hi], what they are, and the unit after the range.
struct KeyRange {
  double lo, hi;
  const char* what;
  const char* unit = "";
};

KeyRange key_range(const std::string& key) {
  if (key == "nodes") return {1, kMaxNodes, "a whole number of nodes"};
  if (key == "cores_per_node") return {0, 1 << 16, "an integer", " (0: ranks x threads)"};
  if (key == "ranks_per_node" || key == "threads_per_rank" || key == "nodes_per_machine")
    return {1, 1 << 16, "an integer"};
  if (key == "fabric.oversubscription") return {1, 1e6, "a ratio", " (1: non-blocking)"};
  if (key.ends_with("_efficiency")) return {1e-3, 1, "a share of the stated rate", ""};
  if (key == "calibration.ranks") return {1, kMaxSimulatedRanks, "an integer"};
  if (key == "calibration.tokens_per_s_per_rank")
    return {1e-6, 1e12, "a finite positive number", " tokens/s"};
  if (key.ends_with("latency_us")) return {0, 1e7, "a latency", " microseconds"};
  // Rates and sizes: positive and finite (1e308 GB/s would make every transfer take 0 s).
  const char* unit = key.ends_with("_gbit")    ? " Gbit/s"
                     : key.ends_with("gflops") ? " GFLOP/s"
                     : key.ends_with("_gib")   ? " GiB"
                                               : " GB/s";
  return {1e-9, 1e12, "a finite positive number", unit};
}

// A bound as people write it: whole numbers below 10^7 in full, others as 1e-09 or 1e+12.
std::string bound(double v) {
  return v == std::floor(v) && std::abs(v) < 1e7 ? fmt::format("{}", int64_t(v))
                                                 : fmt::format("{:g}", v);
}

std::string range_text(const KeyRange& r) {
  return fmt::format("{} in [{}, {}]{}", r.what, bound(r.lo), bound(r.hi), r.unit);
}

// An InputError naming the key, its value and its range unless `v` lies in the range.
void check_value(const std::string& key, double v, bool integer, const std::string& where) {
  const KeyRange r = key_range(key);
  if (!std::isfinite(v) || v < r.lo || v > r.hi || (integer && v != std::floor(v)))
    fail_input("{}: '{}' = {} must be {}", where, key, v, range_text(r));
}

std::string known_keys() {
  std::vector<std::string> names;
  for (const auto& [k, _] : cluster_keys()) names.push_back(k);
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

namespace {

using ClusterStrings = std::map<std::string, std::string>;

// Every key of the file into `c` (numbers, checked) or `strings` (the text keys); an unknown
// key names the closest known one.
void read_cluster_keys(const toml::table& root, const std::string& where, ClusterSpec& c,
                       ClusterStrings& strings) {
  std::function<void(const toml::table&, const std::string&)> walk =
      [&](const toml::table& t, const std::string& prefix) {
        for (const auto& [name, node] : t) {
          const std::string key = prefix + std::string(name.str());
          if (const toml::table* sub = node.as_table(); sub && prefix.empty()) {
            walk(*sub, key + ".");
            continue;
          }
          const auto it = cluster_keys().find(key);
          if (it == cluster_keys().end()) {
            std::string best;
            size_t best_d = SIZE_MAX;
            for (const auto& [k, _] : cluster_keys())
              if (size_t d = edit_distance(key, k); d < best_d) best_d = d, best = k;
            fail_input("{}: unknown cluster key '{}'{}; the keys are {}", where, key,
                       best_d <= 3 ? fmt::format(" (did you mean '{}'?)", best) : std::string(),
                       known_keys());
          }
          const ClusterKey& spec = it->second;
          if (spec.text) {
            const auto v = node.value_exact<std::string>();
            if (!v) fail_input("{}: '{}' must be a string", where, key);
            strings[key] = *v;
            continue;
          }
          // A whole float (1e6) counts as an integer; anything but a number names the range.
          double v = 0;
          if (auto i = node.value_exact<int64_t>())
            v = double(*i);
          else if (auto d = node.value_exact<double>())
            v = *d;
          else
            fail_input("{}: '{}' must be {}", where, key, range_text(key_range(key)));
          check_value(key, v, spec.integer, where);
          spec.set(c, v, key);
        }
      };
  walk(root, "");
}

// [calibration]: a published row the stated rates are fitted to (launch/simulate_calibration).
void apply_calibration_strings(ClusterStrings& strings, const std::string& where, ClusterSpec& c) {
  for (const char* key : {"config", "overrides", "mesh", "source"})
    if (strings.count(std::string("calibration.") + key)) c.has_calibration = true;
  if (!c.has_calibration) return;
  CalibrationRow& row = c.calibration;
  row.config = strings["calibration.config"];
  row.overrides = strings["calibration.overrides"];
  row.source = strings["calibration.source"];
  if (strings.count("calibration.mesh")) row.mesh = strings["calibration.mesh"];
  if (row.ranks == 0 || !(row.tokens_per_s_per_rank > 0))
    fail_input("{}: [calibration] needs ranks and tokens_per_s_per_rank (the row's throughput)",
               where);
  if (!c.profile.empty())
    fail_input(
        "{}: [calibration] fits the stated rates (matmul_gflops, memory_gbps); a profile is "
        "measured already",
        where);
  if (c.matmul_efficiency != 1 || c.memory_efficiency != 1)
    fail_input(
        "{}: [calibration] fits compute.matmul_efficiency and memory_efficiency; drop them or "
        "the row",
        where);
  if (row.mesh != "fsdp" && row.mesh != "hsdp" && row.mesh != "ddp" && row.mesh != "config")
    fail_input("{}: 'calibration.mesh' = '{}' must be fsdp, hsdp, ddp or config", where, row.mesh);
  if (row.config.empty())
    fail_input(
        "{}: [calibration] needs config (the row's model: a bundled config name or a file beside "
        "the cluster's)",
        where);
}

// The text keys, and the combinations of keys a cluster needs (a profile or rates, links).
void apply_cluster_strings(ClusterStrings& strings, const std::string& where, ClusterSpec& c) {
  c.name = strings.count("name") ? strings["name"] : where;
  c.profile = strings.count("compute.profile") ? strings["compute.profile"] : "";
  if (!c.profile.empty() && (c.matmul_efficiency != 1 || c.memory_efficiency != 1))
    fail_input(
        "{}: compute.matmul_efficiency and memory_efficiency scale the stated rates "
        "(matmul_gflops, memory_gbps); a profile's rates are measured",
        where);
  if (c.profile.empty() && !(c.matmul_flops > 0 && c.memory_bandwidth > 0))
    fail_input(
        "{}: [compute] needs profile = \"FILE.json\" (measured by `shardtrain simulate "
        "calibrate`) or both matmul_gflops and memory_gbps",
        where);
  if (strings.count("intra_node.link")) {
    if (strings["intra_node.link"] != "shm")
      fail_input("{}: 'intra_node.link' = '{}': the only measured intra-node link is \"shm\"",
                 where, strings["intra_node.link"]);
    if (c.profile.empty())
      fail_input("{}: 'intra_node.link' = \"shm\" needs compute.profile", where);
    c.intra_from_profile = true;
  } else if (c.ranks_per_node > 1 && !(c.intra.bandwidth > 0)) {
    fail_input("{}: [intra_node] needs bandwidth_gbps (and latency_us), or link = \"shm\"", where);
  }
  if (strings.count("inter_node.link")) {
    if (c.profile.empty()) fail_input("{}: 'inter_node.link' needs compute.profile", where);
    c.inter_profile_link = strings["inter_node.link"];
  } else if (c.nodes > 1 && !(c.inter.bandwidth > 0)) {
    fail_input("{}: [inter_node] needs bandwidth_gbit (and latency_us), or link = a profile's link",
               where);
  }
  if (strings.count("inter_node.nic")) {
    const std::string& n = strings["inter_node.nic"];
    if (n != "per_node" && n != "per_rank")
      fail_input("{}: 'inter_node.nic' = '{}' must be \"per_node\" or \"per_rank\"", where, n);
    c.nic_per_rank = n == "per_rank";
    if (c.nic_per_rank && !c.inter_profile_link.empty())
      fail_input(
          "{}: 'inter_node.nic' = \"per_rank\" needs bandwidth_gbit: a profile's link is "
          "measured per node",
          where);
  }
  if (strings.count("fabric.kind")) {
    const std::string& k = strings["fabric.kind"];
    if (k == "non_blocking")
      c.fabric = FabricKind::non_blocking;
    else if (k == "fat_tree")
      c.fabric = FabricKind::fat_tree;
    else
      fail_input("{}: 'fabric.kind' = '{}' must be \"non_blocking\" or \"fat_tree\"", where, k);
  }
  apply_calibration_strings(strings, where, c);
  if (c.fabric == FabricKind::non_blocking && c.oversubscription != 1)
    fail_input("{}: 'fabric.oversubscription' = {} needs fabric.kind = \"fat_tree\"", where,
               c.oversubscription);
}

}  // namespace

ClusterSpec parse_cluster(const std::string& text, const std::string& where) {
  toml::table root;
  try {
    root = toml::parse(text, where);
  } catch (const toml::parse_error& e) {
    fail_input("{}:{}:{}: invalid TOML: {}", where, e.source().begin.line, e.source().begin.column,
               e.description());
  }
  ClusterSpec c;
  ClusterStrings strings;
  read_cluster_keys(root, where, c, strings);
  if (int64_t(c.nodes) * c.ranks_per_node > kMaxSimulatedRanks)
    fail_input("{}: 'nodes' x 'ranks_per_node' = {} x {} ranks must be at most {}", where, c.nodes,
               c.ranks_per_node, kMaxSimulatedRanks);
  apply_cluster_strings(strings, where, c);
  return c;
}

std::vector<std::string> bundled_cluster_names() {
  std::vector<std::string> names;
  for (const auto& [file, _] : bundled_cluster_files())
    if (file.ends_with(".toml")) names.push_back(file.substr(0, file.size() - 5));
  return names;
}

LoadedCluster load_cluster(const std::string& source) {
  namespace fs = std::filesystem;
  LoadedCluster out;
  std::error_code ec;
  const auto& bundled = bundled_cluster_files();
  std::string dir;
  if (fs::is_regular_file(source, ec)) {
    out.spec = parse_cluster(read_text_file(source), source);
    dir = fs::path(source).parent_path().string();
  } else if (auto it = bundled.find(source + ".toml"); it != bundled.end()) {
    out.spec = parse_cluster(it->second, "bundled cluster '" + source + "'");
    out.bundled = true;
  } else {
    fail_input("--cluster: '{}' is neither a readable file nor a bundled cluster ({})", source,
               fmt::join(bundled_cluster_names(), ", "));
  }
  // A calibration row's config file lies beside the cluster's (a bundled config name stays).
  if (std::string& cfg = out.spec.calibration.config; !cfg.empty() && !dir.empty())
    if (const fs::path beside = fs::path(dir) / cfg; fs::is_regular_file(beside, ec))
      cfg = beside.string();
  if (out.spec.profile.empty()) return out;
  std::stringstream names(out.spec.profile);
  for (std::string name; std::getline(names, name, ',');) {
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    if (name.empty())
      fail_input("{}: compute.profile '{}' names an empty profile", source, out.spec.profile);
    const fs::path path = dir.empty() ? fs::path(name) : fs::path(dir) / name;
    if (!out.bundled || fs::is_regular_file(path, ec)) {
      if (!fs::is_regular_file(path, ec))
        fail_input(
            "{}: compute.profile '{}' is not a readable file (make one with `shardtrain "
            "simulate calibrate --out {}`)",
            source, path.string(), path.string());
      out.profiles.push_back(
          {path.string(), std::make_shared<CalibrationProfile>(read_profile(path.string()))});
    } else if (auto it = bundled.find(name); it != bundled.end()) {
      const std::string where = "bundled profile '" + name + "'";
      out.profiles.push_back(
          {where, std::make_shared<CalibrationProfile>(profile_from_json(it->second, where))});
    } else {
      fail_input("bundled cluster '{}': its profile '{}' is not bundled", source, name);
    }
  }
  out.profile_source = out.profiles.front().first;
  out.profile = out.profiles.front().second;
  return out;
}

}  // namespace st
