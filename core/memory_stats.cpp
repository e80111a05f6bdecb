#include "core/memory_stats.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

#include <fmt/format.h>

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
  // VmHWM can be reset (reset_peak_rss); ru_maxrss cannot, so it is only the fallback.
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    long kib = -1;
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
    std::fclose(f);
    if (kib >= 0) return double(kib) / 1024.0;
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

bool reset_peak_rss() {
  FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

double current_rss_mib() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return double(resident) * double(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

std::string MachineMemory::shortfall(int64_t per_rank_bytes, int ranks_on_node) const {
  const double gib = 1024.0 * kMiB;
  const double node_need = double(per_rank_bytes) * ranks_on_node, ram = double(physical_bytes);
  if (node_need > ram)
    return fmt::format(
        "x {} rank{} on this node = {:.2f} GiB, more than the {:.2f} GiB available ({})",
        ranks_on_node, ranks_on_node == 1 ? "" : "s", node_need / gib, ram / gib, describe());
  if (address_space_limit > 0 && double(per_rank_bytes) > double(address_space_limit))
    return fmt::format("on this rank, more than the {:.2f} GiB available to it ({})",
                       double(address_space_limit) / gib, describe());
  return "";
}

std::string MachineMemory::describe() const {
  const double gib = 1024.0 * kMiB;
  return fmt::format("{:.1f} GiB of RAM, {}", double(physical_bytes) / gib,
                     address_space_limit > 0
                         ? fmt::format("ulimit -v {:.1f} GiB", double(address_space_limit) / gib)
                         : std::string("no ulimit -v"));
}

MachineMemory machine_memory() {
  MachineMemory m;
  m.physical_bytes = int64_t(sysconf(_SC_PHYS_PAGES)) * int64_t(sysconf(_SC_PAGESIZE));
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
    m.address_space_limit = int64_t(limit.rlim_cur);
  return m;
}

}  // namespace st
