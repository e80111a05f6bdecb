#pragma once
// The best matmul rate this machine has shown for one layout of ranks and threads, kept between
// runs (launch/cache_dir.hpp, peaks.json), so that MFU's denominator is a figure contention
// cannot lower: a start-up measured while other jobs ran (the peak swung 124-409 GFLOP/s
// between runs on a loaded 2-core EPYC) would otherwise put MFU above 100%.
#include <optional>
#include <string>

#include "core/dtype.hpp"

namespace st {

// What the peak depends on: the CPU (brand, cores, features), the matmul's dtype and how the
// ranks and their threads share the machines.
std::string peak_cache_key(DType dtype, int ranks, int threads, int ranks_on_node);

// The file the peaks are kept in.
std::string peak_cache_path();

// The best rate recorded under `key` (GFLOP/s, all ranks), if any. A missing, unreadable or
// damaged file, or a value that is not a positive finite number below 1e9, counts as none.
std::optional<double> best_known_peak(const std::string& key);

// Records `gflops` under `key` when it beats what is recorded (a temporary renamed over the
// file, so concurrent jobs never read half a file). Returns "" or why it could not be written
// (the cache is an aid: a read-only home does not stop training).
std::string remember_peak(const std::string& key, double gflops);

}  // namespace st
