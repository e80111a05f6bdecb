#pragma once
// Bytes held by shardtrain's own tensors (current and peak) and the process's peak RSS.
#include <cstddef>
#include <cstdint>

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

}  // namespace st
