#pragma once
// Cluster TOML files for `shardtrain simulate --cluster`: parsed strictly (an unknown key, a
// wrong type or a value out of range is an InputError naming the key), with the bundled ones
// of launch/clusters/ compiled in.
#include <memory>
#include <string>
#include <vector>

#include "simulate/cluster.hpp"
#include "simulate/profile.hpp"

namespace st {

struct LoadedCluster {
  ClusterSpec spec;
  std::shared_ptr<CalibrationProfile> profile;  // the one in use (at first: the first named)
  std::string profile_source;                   // its path, or "bundled profile 'NAME'"
  // Every profile compute.profile names (a comma-separated list: one per model family, say), in
  // order, with its source; `simulate` uses the one of the config's family when there is one.
  std::vector<std::pair<std::string, std::shared_ptr<CalibrationProfile>>> profiles;
  bool bundled = false;  // a cluster compiled into the program
};

// `source` is a path or a bundled cluster's name (this-machine, ethernet-25g-8x16, ...).
LoadedCluster load_cluster(const std::string& source);
// The parse of a cluster's TOML text; `dir` resolves a relative profile path.
ClusterSpec parse_cluster(const std::string& text, const std::string& where);
std::vector<std::string> bundled_cluster_names();

}  // namespace st
