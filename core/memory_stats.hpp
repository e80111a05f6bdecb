#pragma once
// Bytes held by shardtrain's own tensors (current and peak) and the process's peak RSS.
#include <cstddef>
#include <cstdint>
#include <string>

namespace st {

constexpr double kMiB = 1024.0 * 1024.0;

struct TensorMemory {
  int64_t current_bytes;
  int64_t peak_bytes;
};

TensorMemory tensor_memory();
// Starts a new peak window at the current level (for "bytes allocated during X" checks).
void reset_tensor_memory_peak();
void note_tensor_alloc(int64_t bytes);
void note_tensor_free(int64_t bytes);

// Peak resident set size of this process in MiB (VmHWM, since start or the last reset).
double peak_rss_mib();
// Restarts the peak RSS window at the current RSS (Linux clear_refs); false if unsupported.
bool reset_peak_rss();
// Current resident set size in MiB (from /proc/self/statm).
double current_rss_mib();

// What this machine can give a job: physical memory, and the address-space limit of this
// process (ulimit -v; 0: none), which bounds every rank alike.
struct MachineMemory {
  int64_t physical_bytes = 0;
  int64_t address_space_limit = 0;
  // Whether `ranks_on_node` processes of `per_rank_bytes` each fit: the node's ranks share its
  // RAM, and ulimit -v bounds each process on its own. "" when they fit, else what they exceed
  // ("x 2 ranks on this node = 3.10 GiB, more than the 2.00 GiB available (...)").
  std::string shortfall(int64_t per_rank_bytes, int ranks_on_node) const;
  std::string describe() const;  // "23.4 GiB of RAM, no ulimit -v"
};
MachineMemory machine_memory();

}  // namespace st
