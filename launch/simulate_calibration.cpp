#include "launch/simulate_calibration.hpp"

#include <fmt/format.h>

#include <cmath>
#include <sstream>

#include "core/error.hpp"
#include "launch/simulate_command.hpp"

namespace st {

namespace {

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

}  // namespace

void fit_calibration(LoadedCluster& cluster, const Config& command_config, int max_ring_steps) {
  const CalibrationRow& row = cluster.spec.calibration;
  const std::string where = fmt::format("cluster '{}' [calibration]", cluster.spec.name);
  const Config config =
      row.config.empty() ? command_config : load_config(row.config, split_words(row.overrides));
  const auto meshes = meshes_for(config, {row.mesh}, row.ranks, cluster.spec.ranks_per_node);
  if (meshes.empty()) fail_input("{}: mesh '{}' cannot split {} ranks", where, row.mesh, row.ranks);
  SimOptions options;
  options.max_ring_steps = max_ring_steps;
  // The row's tokens/s per rank with both stated rates at share e.
  auto tokens_per_rank = [&](double e) {
    LoadedCluster c = cluster;
    c.spec.matmul_efficiency = c.spec.memory_efficiency = e;
    c.spec.has_calibration = false;
    return predict(config, c, row.ranks, meshes.front().first, meshes.front().second, options)
               .tokens_per_s /
           row.ranks;
  };
  const double target = row.tokens_per_s_per_rank, full = tokens_per_rank(1.0);
  if (full < target * (1 - 1e-3))
    fail_input(
        "{}: {} tokens/s a rank is more than the cluster's stated rates allow for that row at "
        "full efficiency ({:.0f} tokens/s a rank with matmul_gflops and memory_gbps as stated): "
        "the row contradicts the cluster; check the row or raise the rates",
        where, target, full);
  // Compute scales as 1/e and communication not: e' = e x target / f(e) converges (each step
  // shrinks the error by the communication's share of the step).
  double e = target / full;
  for (int k = 0; k < 30; ++k) {
    if (e < 1e-3)
      fail_input(
          "{}: {} tokens/s a rank would need the cluster's compute at less than 0.1% of its "
          "stated rates: the row contradicts the cluster",
          where, target);
    const double got = tokens_per_rank(e);
    if (std::abs(got - target) <= 1e-3 * target) break;
    e = std::min(1.0, e * target / got);
  }
  cluster.spec.matmul_efficiency = cluster.spec.memory_efficiency = e;
  cluster.spec.efficiency_source =
      fmt::format("fitted to {} tokens/s a rank of {} ranks ({}){}", target, row.ranks, row.mesh,
                  row.source.empty() ? "" : ": " + row.source);
}

}  // namespace st
