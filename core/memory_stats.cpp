#include "core/memory_stats.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

namespace st {
namespace {
std::atomic<int64_t> current{0};
std::atomic<int64_t> peak{0};
}  // namespace

TensorMemory tensor_memory() {
  return {current.load(), peak.load()};
}

void reset_tensor_memory_peak() {
  peak = current.load();
}

void note_tensor_alloc(int64_t bytes) {
  const int64_t now = current.fetch_add(bytes) + bytes;
  int64_t seen = peak.load();
  while (now > seen && !peak.compare_exchange_weak(seen, now)) {
  }
}

void note_tensor_free(int64_t bytes) {
  current.fetch_sub(bytes);
}

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

double current_rss_mib() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return double(resident) * double(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

}  // namespace st
