#include "parallel/fsdp/unit_layout.hpp"

#include <algorithm>

namespace st {

std::string unit_name(const std::vector<ParamSpec>& specs, const std::vector<size_t>& params,
                      int unit) {
  if (unit == 0 || params.empty()) return unit == 0 ? "root" : "unit " + std::to_string(unit);
  if (params.size() == 1) return specs[params.front()].name;
  // The longest dotted prefix shared by every parameter name of the unit.
  std::string prefix = specs[params.front()].name;
  for (size_t i : params) {
    const std::string& n = specs[i].name;
    size_t k = 0;
    while (k < prefix.size() && k < n.size() && prefix[k] == n[k]) ++k;
    prefix.resize(k);
  }
  const size_t dot = prefix.rfind('.');
  return dot == std::string::npos ? prefix : prefix.substr(0, dot);
}

std::vector<ShardSegment> UnitLayout::segments(const std::vector<ParamSpec>& specs,
                                               int rank) const {
  std::vector<ShardSegment> out;
  const int64_t begin = int64_t(rank) * shard_numel, end = begin + shard_numel;
  for (size_t k = 0; k < params.size(); ++k) {
    const int64_t p_begin = flat_offsets[k], p_end = p_begin + specs[params[k]].numel();
    const int64_t lo = std::max(begin, p_begin), hi = std::min(end, p_end);
    if (lo < hi) out.push_back({params[k], lo - p_begin, lo - begin, hi - lo});
  }
  return out;
}

std::vector<UnitLayout> layout_units(const std::vector<ParamSpec>& specs, int num_units,
                                     int world_size) {
  ST_CHECK(world_size >= 1, "world size {} must be at least 1", world_size);
  std::vector<UnitLayout> units(static_cast<size_t>(num_units));
  for (size_t i = 0; i < specs.size(); ++i) {
    const int u = specs[i].unit;
    ST_CHECK(u >= 0 && u < num_units, "parameter '{}' names unit {} of {}", specs[i].name, u,
             num_units);
    UnitLayout& layout = units[size_t(u)];
    layout.params.push_back(i);
    layout.flat_offsets.push_back(layout.numel);
    layout.numel += specs[i].numel();
  }
  for (int u = 0; u < num_units; ++u) {
    UnitLayout& layout = units[size_t(u)];
    layout.unit = u;
    layout.name = unit_name(specs, layout.params, u);
    if (layout.numel == 0) fail("unit {} ('{}') has no parameters", u, layout.name);
    layout.shard_numel = (layout.numel + world_size - 1) / world_size;
    layout.padded_numel = layout.shard_numel * world_size;
  }
  return units;
}

}  // namespace st
