#pragma once
// A cluster to simulate, as its TOML describes it (launch/cluster_config.cpp parses and checks
// it): nodes of ranks, each rank's compute, the link inside a node and each node's link to the
// fabric. Units are SI: bytes per second, seconds.
#include <string>

namespace st {

// The most ranks a simulated job may have (16,777,216): rank arithmetic and group ids
// (symmetry.hpp) stay well inside an int, planning a row (a node per rank of a group) takes
// seconds at most, and it is far above the largest worlds simulated (131,072 ranks).
constexpr int kMaxSimulatedRanks = 1 << 24;

// A point-to-point link class: one message of n bytes takes latency + n / bandwidth.
struct LinkSpec {
  double bandwidth = 0;  // bytes/s
  double latency = 0;    // s
};

enum class FabricKind {
  non_blocking,  // every node's link runs at full rate at once
  fat_tree,      // a shared core of nodes × link bandwidth / oversubscription
};

// A published or measured row that calibrates a cluster's stated rates: `config` (a file, or a
// bundled config name; empty: the command's) with `overrides` ("key=value ..."), `mesh` (fsdp,
// hsdp, ddp or config) on `ranks` ranks ran at `tokens_per_s_per_rank`.
struct CalibrationRow {
  std::string config, overrides, mesh = "fsdp", source;
  int ranks = 0;
  double tokens_per_s_per_rank = 0;
};

struct ClusterSpec {
  std::string name;
  int nodes = 1;
  int ranks_per_node = 1;
  int threads_per_rank = 1;
  int cores_per_node = 0;       // 0: ranks_per_node × threads_per_rank (no oversubscription)
  int nodes_per_machine = 1;    // nodes sharing one machine's cores (emulated hosts)
  double memory_per_node = 0;   // bytes; 0: unknown (nothing is marked as not fitting)
  std::string profile;          // calibration profile (path), or empty
  double matmul_flops = 0;      // per rank, FLOP/s (without a profile)
  double memory_bandwidth = 0;  // per rank, bytes/s (without a profile)
  // The shares of those rates the model's matmuls and memory-bound work reach (1: the stated
  // rates), given or fitted to `calibration` (efficiency_source says which).
  double matmul_efficiency = 1, memory_efficiency = 1;
  std::string efficiency_source;
  bool has_calibration = false;
  CalibrationRow calibration;
  // Inside a node: a link class, or (intra_from_profile) the profile's shared-memory fits.
  LinkSpec intra;
  bool intra_from_profile = false;
  // Each node's link to the fabric, or (inter_profile_link non-empty) a link class the profile
  // measured ("tcp", "tcp-1gbit", ...).
  LinkSpec inter;
  std::string inter_profile_link;
  bool nic_per_rank = false;  // inter is each rank's own NIC (GPU pods), not the node's link
  FabricKind fabric = FabricKind::non_blocking;
  double oversubscription = 1;  // fat_tree only: >= 1

  int world() const { return nodes * ranks_per_node; }
  int cores() const {
    return cores_per_node > 0 ? cores_per_node : ranks_per_node * threads_per_rank;
  }
  // Ranks per core of one machine (its nodes' ranks over its cores).
  double ranks_per_core() const { return double(ranks_per_node) / cores(); }
};

}  // namespace st
