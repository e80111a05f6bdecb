#include "bench/bench_scaling.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "bench/subprocess.hpp"
#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/progress.hpp"

namespace st {

namespace fs = std::filesystem;

int run_bench_scaling(const ScalingOptions& o) {
  const fs::path shardrun = find_shardrun();
  const std::string exe = this_executable();
  std::string step_args = fmt::format(" bench step --json --config {} --steps {} --warmup {}",
                                      quote(o.config), o.steps, o.warmup);
  for (const auto& kv : o.overrides) {
    step_args.push_back(' ');
    step_args.append(quote(kv));
  }

  struct Run {
    std::string label, command;
    std::vector<nlohmann::json> results;
    nlohmann::json result;  // the repeat with the median tokens/s
  };
  std::vector<Run> runs;
  // The baseline: one process using every core, no mpirun.
  runs.push_back({"1 process, no mpirun", quote(exe) + step_args + " 2>&1", {}, {}});
  for (int n : o.ranks)
    runs.push_back(
        {fmt::format("{} rank{} (mpirun)", n, n == 1 ? "" : "s"),
         fmt::format("{} -n {} {}{} 2>&1", quote(shardrun.string()), n, quote(exe), step_args),
         {},
         {}});
  // Interleaved repeats, so a slow spell of this shared machine hits every row alike.
  Progress progress("bench scaling", long(o.repeats * runs.size()));
  long done = 0;
  for (int rep = 0; rep < o.repeats; ++rep)
    for (Run& r : runs) {
      progress.update(done++, fmt::format("{} (repeat {})", r.label, rep + 1));
      r.results.push_back(run_for_json(r.command));
    }
  progress.finish("done");
  for (Run& r : runs) {
    std::sort(r.results.begin(), r.results.end(), [](const auto& a, const auto& b) {
      return a["tokens_per_s"].template get<double>() < b["tokens_per_s"].template get<double>();
    });
    r.result = r.results[r.results.size() / 2];
  }
  const double base = runs.front().result["tokens_per_s"].get<double>();
  if (!o.json)
    fmt::print(
        "bench scaling | config {} | same global batch | medians of {} steps, median of {} runs\n"
        "{:<22} {:>7} {:>9} {:>8} {:>9} {:>9} {:>7} {:>9} {:>9} {:>7}\n",
        o.config, o.steps, o.repeats, "run", "threads", "tokens/s", "vs base", "step_ms", "compute",
        "comm%", "rss_MiB", "budget", "rss/bud");
  for (const Run& r : runs) {
    const auto& j = r.result;
    const double step = j["step_ms"], exposed = j["exposed_comm_ms"];
    const double rss = j["peak_rss_mib"], budget = j["budget_mib"];
    nlohmann::json line = {{"config", o.config},
                           {"ranks", j["ranks"]},
                           {"threads", j["threads"]},
                           {"mpirun", r.label.find("mpirun)") != std::string::npos},
                           {"tokens_per_s", j["tokens_per_s"]},
                           {"vs_baseline", j["tokens_per_s"].get<double>() / base},
                           {"step_ms", step},
                           {"compute_ms", step - exposed},
                           {"exposed_comm_ms", exposed},
                           {"peak_rss_mib", rss},
                           {"budget_mib", budget}};
    if (o.json) {
      fmt::print("{}\n", line.dump());
    } else {
      fmt::print(
          "{:<22} {:>7} {:>9.0f} {:>7.2f}x {:>9.1f} {:>9.1f} {:>6.1f}% {:>9.1f} {:>9.1f} "
          "{:>6.2f}x\n",
          r.label, j["threads"].get<int>(), j["tokens_per_s"].get<double>(),
          line["vs_baseline"].get<double>(), step, step - exposed, 100 * exposed / step, rss,
          budget, rss / budget);
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace st
