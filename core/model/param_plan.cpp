#include "core/model/param_plan.hpp"

#include "core/error.hpp"

namespace st {

int64_t block_of_param(const std::string& name, const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0) return -1;
  const size_t dot = name.find('.', prefix.size());
  ST_CHECK(dot != std::string::npos && dot > prefix.size(), "parameter '{}' has no block index",
           name);
  int64_t l = 0;
  for (size_t i = prefix.size(); i < dot; ++i) {
    ST_CHECK(name[i] >= '0' && name[i] <= '9', "parameter '{}' has no block index", name);
    l = l * 10 + (name[i] - '0');
  }
  return l;
}

void assign_block_units(std::vector<ParamSpec>& specs, const std::string& block_prefix) {
  for (ParamSpec& s : specs) s.unit = int(block_of_param(s.name, block_prefix) + 1);
}

void assign_placements(std::vector<ParamSpec>& specs,
                       const std::vector<std::pair<std::string, Placement>>& rules) {
  for (ParamSpec& s : specs) {
    s.placement = Placement{};
    for (const auto& [suffix, placement] : rules)
      if (s.name.size() >= suffix.size() &&
          s.name.compare(s.name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        s.placement = placement;
        break;
      }
  }
}

}  // namespace st
