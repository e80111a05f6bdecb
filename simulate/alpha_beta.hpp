#pragma once
// The α-β (latency, time per byte) cost model of collectives: fitting it to measured timings,
// and its closed forms for ring collectives, which the tests hold the simulator to on a
// platform without contention.
#include <utility>
#include <vector>

namespace st {

struct AlphaBeta {
  double alpha = 0;  // s per message (per ring step)
  double beta = 0;   // s per byte
};

// Least-squares fit of t = steps·α + bytes·β over (steps, bytes, seconds) samples, α and β
// clamped at 0 (a negative latency is noise). At least two samples with different byte counts.
struct TimingSample {
  double steps;  // messages on the critical path (p - 1 for a ring all-gather)
  double bytes;  // bytes on the critical path ((p - 1)/p · n for a ring all-gather)
  double seconds;
};
AlphaBeta fit_alpha_beta(const std::vector<TimingSample>& samples);

// Ring all-gather or reduce-scatter of a buffer of n bytes (the whole, unsharded size) over p
// ranks: (p − 1)·α + n·(p − 1)/p·β.
double ring_gather_seconds(const AlphaBeta& link, double n, int p);
// Ring all-reduce: a reduce-scatter and an all-gather, 2·(p − 1)·α + 2·n·(p − 1)/p·β.
double ring_all_reduce_seconds(const AlphaBeta& link, double n, int p);

}  // namespace st
