#pragma once
// Summary statistics for repeated measurements (benchmarks quote medians).
#include <algorithm>
#include <vector>

namespace st {

// The median (the upper one for an even count); 0 for no values.
inline double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  const auto mid = values.begin() + std::ptrdiff_t(values.size() / 2);
  std::nth_element(values.begin(), mid, values.end());
  return *mid;
}

}  // namespace st
