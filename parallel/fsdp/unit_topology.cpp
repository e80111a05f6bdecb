#include "parallel/fsdp/unit_topology.hpp"

#include "core/error.hpp"

namespace st {

UnitTopology UnitTopology::root_and_chain(int num_units) {
  ST_CHECK(num_units >= 1, "a model needs at least its root unit, not {} units", num_units);
  UnitTopology t;
  for (int u = 0; u < num_units; ++u) t.forward.push_back(u);
  t.backward.push_back(kRoot);
  for (int u = num_units - 1; u >= 1; --u) t.backward.push_back(u);
  return t;
}

}  // namespace st
