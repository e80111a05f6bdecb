#pragma once
#include <map>
#include <string>

namespace st {
// name -> TOML text of launch/configs/NAME.toml, compiled in so the binary works anywhere.
const std::map<std::string, std::string>& bundled_configs();
// file name -> text of launch/clusters/* (cluster TOMLs and their calibration profiles).
const std::map<std::string, std::string>& bundled_cluster_files();
}  // namespace st
