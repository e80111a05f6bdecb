#pragma once
// A cluster's [calibration] row: a published (or measured) tokens/s of one layout, to which the
// stated compute rates are fitted, so that a GPU cluster's published row calibrates the rest.
#include "launch/cluster_config.hpp"

namespace st {

// Sets cluster.spec's matmul and memory efficiencies (one share e of both stated rates) so that
// simulating its calibration row (its own config and overrides) gives the row's tokens/s per
// rank, to 0.1%. Exit 2 naming the row when it contradicts the cluster (faster than its stated
// rates allow, slower than a thousandth of them, or hardly depending on them) or cannot run.
void fit_calibration(LoadedCluster& cluster, int max_ring_steps);

}  // namespace st
