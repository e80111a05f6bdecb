#include "parallel/pipeline/stage_partition.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.hpp"

namespace st {

double largest_stage_cost(const std::vector<StageRange>& split,
                          const std::vector<double>& block_cost, double first_extra,
                          double last_extra) {
  double largest = 0;
  for (size_t s = 0; s < split.size(); ++s) {
    double cost = (s == 0 ? first_extra : 0) + (s + 1 == split.size() ? last_extra : 0);
    for (int b = split[s].first; b < split[s].end; ++b) cost += block_cost[size_t(b)];
    largest = std::max(largest, cost);
  }
  return largest;
}

std::vector<StageRange> balance_stages(const std::vector<double>& block_cost, double first_extra,
                                       double last_extra, int stages) {
  const int L = int(block_cost.size());
  if (stages < 1) fail_input("parallel.pp = {} stages: must be >= 1", stages);
  if (L < stages)
    fail_input(
        "parallel.pp x parallel.pp_virtual_stages = {} stages for model.n_layer = {} "
        "blocks: every stage needs at least one block",
        stages, L);
  std::vector<double> prefix(size_t(L) + 1, 0);
  for (int b = 0; b < L; ++b) prefix[size_t(b) + 1] = prefix[size_t(b)] + block_cost[size_t(b)];
  auto run = [&](int s, int from, int to) {
    return prefix[size_t(to)] - prefix[size_t(from)] + (s == 0 ? first_extra : 0) +
           (s == stages - 1 && to == L ? last_extra : 0);
  };
  // Two passes over "stage s ends at block i": the smallest possible largest cost first; then,
  // among the splits within it, the one with the smallest sum of squared stage costs (the most
  // even; ties to the earliest cut).
  const double inf = std::numeric_limits<double>::infinity();
  auto table = [&](auto&& value) {
    std::vector<std::vector<double>> best(size_t(stages), std::vector<double>(size_t(L) + 1, inf));
    std::vector<std::vector<int>> cut(size_t(stages), std::vector<int>(size_t(L) + 1, -1));
    for (int i = 1; i <= L; ++i)
      if (double v = value(0.0, run(0, 0, i)); v < inf)
        best[0][size_t(i)] = v, cut[0][size_t(i)] = 0;
    for (int s = 1; s < stages; ++s)
      for (int i = s + 1; i <= L; ++i)
        for (int j = s; j < i; ++j) {
          const double before = best[size_t(s) - 1][size_t(j)];
          if (before == inf) continue;
          // Better by more than rounding (sums in another order), or the first found.
          const double v = value(before, run(s, j, i)), held = best[size_t(s)][size_t(i)];
          if (held == inf || v < held - 1e-12 * std::abs(held))
            best[size_t(s)][size_t(i)] = v, cut[size_t(s)][size_t(i)] = j;
        }
    return std::pair{best, cut};
  };
  const double largest = table([](double before, double cost) {
                           return std::max(before, cost);
                         }).first[size_t(stages) - 1][size_t(L)];
  const double limit = largest * (1 + 1e-12);
  const auto cut = table([&](double before, double cost) {
                     return cost <= limit ? before + cost * cost : inf;
                   }).second;
  std::vector<StageRange> split(static_cast<size_t>(stages));
  for (int s = stages - 1, end = L; s >= 0; --s) {
    const int first = cut[size_t(s)][size_t(end)];
    split[size_t(s)] = {first, end};
    end = first;
  }
  return split;
}

std::vector<StageRange> stages_from_layers(const std::vector<int>& pp_layers, int n_layer,
                                           int stages) {
  if (int(pp_layers.size()) != stages)
    fail_input(
        "parallel.pp_layers has {} entries: it needs one per stage, {} (parallel.pp x "
        "parallel.pp_virtual_stages)",
        pp_layers.size(), stages);
  std::vector<StageRange> split;
  int first = 0;
  for (size_t s = 0; s < pp_layers.size(); ++s) {
    if (pp_layers[s] < 1)
      fail_input("parallel.pp_layers[{}] = {}: every stage needs at least one block", s,
                 pp_layers[s]);
    if (pp_layers[s] > n_layer - first)
      fail_input("parallel.pp_layers = {} sums past model.n_layer = {}",
                 fmt::format("[{}]", fmt::join(pp_layers, ", ")), n_layer);
    split.push_back({first, first + pp_layers[s]});
    first += pp_layers[s];
  }
  if (first != n_layer)
    fail_input("parallel.pp_layers = [{}] sums to {}, not model.n_layer = {}",
               fmt::join(pp_layers, ", "), first, n_layer);
  return split;
}

std::string describe_stages(const std::vector<StageRange>& split) {
  std::string s;
  for (const StageRange& b : split)
    s += fmt::format("{}[{}-{})", s.empty() ? "" : " ", b.first, b.end);
  return s;
}

}  // namespace st
