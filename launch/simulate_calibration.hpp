#pragma once
// A cluster's [calibration] row: a published (or measured) tokens/s of one layout, to which the
// stated compute rates are fitted, so that a GPU cluster's published row calibrates the rest.
#include "launch/cluster_config.hpp"
#include "launch/config.hpp"

namespace st {

// Sets cluster.spec's matmul and memory efficiencies (one share e of both stated rates) so that
// simulating its calibration row gives the row's tokens/s per rank, to 0.1%. The row's model is
// its own config (or `command_config` when it names none). Exit 2 when the row contradicts the
// cluster: faster than its stated rates allow (e > 1), or slower than a thousandth of them.
void fit_calibration(LoadedCluster& cluster, const Config& command_config, int max_ring_steps);

}  // namespace st
