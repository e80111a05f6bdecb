#include "bench/bench_mesh.hpp"

#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>

#include "bench/subprocess.hpp"
#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/progress.hpp"

namespace st {
namespace {

struct MeshRun {
  std::string name;
  std::vector<std::string> keys;
};

std::vector<MeshRun> mesh_runs(int ranks, int nodes) {
  const int per_node = ranks / nodes;
  return {{fmt::format("FSDP {}", ranks),
           {fmt::format("sharding.shard_degree={}", ranks), "sharding.replicate_degree=1"}},
          {fmt::format("HSDP {}x{} each", nodes, per_node),
           {fmt::format("sharding.shard_degree={}", per_node),
            fmt::format("sharding.replicate_degree={}", nodes), "sharding.replica_sync=each"}},
          {fmt::format("HSDP {}x{} last", nodes, per_node),
           {fmt::format("sharding.shard_degree={}", per_node),
            fmt::format("sharding.replicate_degree={}", nodes), "sharding.replica_sync=last"}},
          {fmt::format("DDP {}", ranks),
           {"sharding.shard_degree=1", fmt::format("sharding.replicate_degree={}", ranks)}}};
}

std::string link_name(double gbit) {
  return gbit > 0 ? fmt::format("{:g} Gbit/s", gbit) : std::string("uncapped");
}

}  // namespace

int run_bench_mesh(const MeshBenchOptions& o) {
  if (o.nodes < 2 || o.ranks % o.nodes != 0 || o.steps < 1 || o.warmup < 0 || o.micro_batches < 1)
    fail_input(
        "bench mesh: --ranks must split evenly over --nodes >= 2; --steps >= 1, --warmup >= 0, "
        "--micro-batches >= 1");
  const std::string shardrun = find_shardrun().string();
  const std::string exe = this_executable();
  const auto meshes = mesh_runs(o.ranks, o.nodes);
  Progress progress("bench mesh", long(o.gbit.size() * meshes.size()));
  long done = 0;
  std::map<std::pair<double, std::string>, double> tokens;
  if (!o.json)
    fmt::print(
        "bench mesh | config {} | {} ranks on {} emulated hosts | {} micro-batches | medians of "
        "{} steps\n{:<18} {:>10} {:>9} {:>8} {:>8} {:>12} {:>10} {:>8}\n",
        o.config, o.ranks, o.nodes, o.micro_batches, o.steps, "mesh", "link", "tokens/s", "step_ms",
        "comm%", "inter MiB", "predicted", "rss MiB");
  for (double gbit : o.gbit)
    for (const MeshRun& mesh : meshes) {
      progress.update(done++, fmt::format("{}, {}", mesh.name, link_name(gbit)));
      std::string command = fmt::format(
          "{} -n {} --nodes {}{} {} bench step --json --config {} --steps {} --warmup {} "
          "training.micro_batches={} training.global_batch={}",
          quote(shardrun), o.ranks, o.nodes, gbit > 0 ? fmt::format(" --link-gbit {:g}", gbit) : "",
          quote(exe), quote(o.config), o.steps, o.warmup, o.micro_batches,
          o.ranks * o.micro_batches);
      for (const auto& kv : mesh.keys) command.append(" ").append(quote(kv));
      for (const auto& kv : o.overrides) command.append(" ").append(quote(kv));
      const nlohmann::json j = run_for_json(command + " 2>&1");
      const double step = j["step_ms"], exposed = j["exposed_comm_ms"];
      tokens[{gbit, mesh.name}] = j["tokens_per_s"];
      const nlohmann::json line = {{"config", o.config},
                                   {"mesh", mesh.name},
                                   {"link_gbit", gbit},
                                   {"ranks", o.ranks},
                                   {"nodes", o.nodes},
                                   {"tokens_per_s", j["tokens_per_s"]},
                                   {"step_ms", step},
                                   {"exposed_comm_ms", exposed},
                                   {"inter_node_mib", j["inter_node_mib"]},
                                   {"inter_node_mib_predicted", j["inter_node_mib_predicted"]},
                                   {"peak_rss_mib", j["peak_rss_mib"]},
                                   {"budget_mib", j["budget_mib"]}};
      if (o.json)
        fmt::print("{}\n", line.dump());
      else
        fmt::print("{:<18} {:>10} {:>9.0f} {:>8.1f} {:>7.1f}% {:>12.1f} {:>10.1f} {:>8.0f}\n",
                   mesh.name, link_name(gbit), j["tokens_per_s"].get<double>(), step,
                   100 * exposed / step, j["inter_node_mib"].get<double>(),
                   j["inter_node_mib_predicted"].get<double>(), j["peak_rss_mib"].get<double>());
      std::fflush(stdout);
    }
  progress.finish("done");
  if (!o.json)
    for (double gbit : o.gbit) {
      const double fsdp = tokens[{gbit, meshes[0].name}], last = tokens[{gbit, meshes[2].name}];
      fmt::print("{}: {} / {} tokens/s = {:.2f}x\n", link_name(gbit), meshes[2].name,
                 meshes[0].name, fsdp > 0 ? last / fsdp : 0.0);
    }
  return 0;
}

}  // namespace st
