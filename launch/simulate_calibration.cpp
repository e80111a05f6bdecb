#include "launch/simulate_calibration.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
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

// The row's tokens/s per rank with both stated rates at share `e`.
double row_tokens_per_rank(const LoadedCluster& cluster, const Config& config,
                           const std::pair<std::string, MeshShape>& mesh, double e,
                           const SimOptions& options) {
  LoadedCluster c = cluster;
  c.spec.matmul_efficiency = c.spec.memory_efficiency = e;
  c.spec.has_calibration = false;
  const int ranks = cluster.spec.calibration.ranks;
  return predict(config, c, ranks, mesh.first, mesh.second, options).tokens_per_s / ranks;
}

// The share e in [0.001, 1] at which the row runs at `target`: the fixed point e' = e x target /
// f(e) first (compute scales as 1/e, communication not: each step shrinks the error by the
// communication's share), bisection if that stalls; NaN when neither reaches 0.1%.
double fit_share(const std::function<double(double)>& f, double target, double full) {
  auto close = [&](double got) { return std::abs(got - target) <= 1e-3 * target; };
  double e = std::clamp(target / full, 1e-3, 1.0);
  for (int k = 0; k < 12; ++k) {
    const double got = f(e);
    if (close(got)) return e;
    e = std::clamp(e * target / got, 1e-3, 1.0);
  }
  double lo = 1e-3, hi = 1.0;  // f rises with e: f(lo) <= target <= f(hi)
  for (int k = 0; k < 60; ++k) {
    const double mid = std::sqrt(lo * hi), got = f(mid);
    if (close(got)) return mid;
    (got < target ? lo : hi) = mid;
  }
  return std::nan("");
}

}  // namespace

void fit_calibration(LoadedCluster& cluster, int max_ring_steps) {
  const CalibrationRow& row = cluster.spec.calibration;
  const std::string where = fmt::format("cluster '{}' [calibration]", cluster.spec.name);
  try {
    const Config config = load_config(row.config, split_words(row.overrides));
    const auto meshes = meshes_for(config, {row.mesh}, row.ranks, cluster.spec.ranks_per_node);
    if (meshes.empty()) fail_input("mesh '{}' cannot split {} ranks", row.mesh, row.ranks);
    SimOptions options;
    options.max_ring_steps = max_ring_steps;
    auto f = [&](double e) {
      return row_tokens_per_rank(cluster, config, meshes.front(), e, options);
    };
    const double target = row.tokens_per_s_per_rank, full = f(1.0);
    if (full < target * (1 - 1e-3))
      fail_input(
          "{} tokens/s a rank is more than the cluster's stated rates allow for that row at full "
          "efficiency ({:.0f} tokens/s a rank with matmul_gflops and memory_gbps as stated): the "
          "row contradicts the cluster; check the row or raise the rates",
          target, full);
    if (f(1e-3) > target * (1 + 1e-3))
      fail_input(
          "{} tokens/s a rank would need the cluster's compute at less than 0.1% of its stated "
          "rates: the row contradicts the cluster",
          target);
    const double e = fit_share(f, target, full);
    if (std::isnan(e))
      fail_input(
          "no efficiency of the stated rates gives {} tokens/s a rank to 0.1% (the row's step "
          "hardly depends on compute: it is communication-bound on this cluster)",
          target);
    cluster.spec.matmul_efficiency = cluster.spec.memory_efficiency = e;
  } catch (const InputError& e) {
    fail_input("{}: {}", where, e.what());
  }
  cluster.spec.efficiency_source =
      fmt::format("fitted to {} tokens/s a rank of {} ranks ({}){}", row.tokens_per_s_per_rank,
                  row.ranks, row.mesh, row.source.empty() ? "" : ": " + row.source);
}

}  // namespace st
