#include "simulate/alpha_beta.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace st {

AlphaBeta fit_alpha_beta(const std::vector<TimingSample>& samples) {
  if (samples.size() < 2)
    fail_input("an α-β fit needs at least two timings, got {}", samples.size());
  // Normal equations of min Σ (s_i α + b_i β − t_i)², weighted by 1/t_i² so small messages
  // (where α shows) count as much as large ones (where β does): a relative-error fit.
  double ss = 0, sb = 0, bb = 0, st_ = 0, bt = 0;
  for (const TimingSample& x : samples) {
    if (!(x.seconds > 0) || !(x.steps >= 0) || !(x.bytes >= 0))
      fail_input("an α-β timing needs seconds > 0 and non-negative steps and bytes");
    const double w = 1.0 / (x.seconds * x.seconds);
    ss += w * x.steps * x.steps;
    sb += w * x.steps * x.bytes;
    bb += w * x.bytes * x.bytes;
    st_ += w * x.steps * x.seconds;
    bt += w * x.bytes * x.seconds;
  }
  const double det = ss * bb - sb * sb;
  if (!(std::abs(det) > 1e-9 * ss * bb))
    fail_input("the timings of an α-β fit must cover at least two message sizes");
  AlphaBeta f{(st_ * bb - bt * sb) / det, (ss * bt - sb * st_) / det};
  // A negative coefficient: refit the other alone.
  if (f.alpha < 0) f = {0, bt / bb};
  if (f.beta < 0) f = {st_ / ss, 0};
  return f;
}

double ring_gather_seconds(const AlphaBeta& link, double n, int p) {
  if (p <= 1) return 0;
  return (p - 1) * link.alpha + n * double(p - 1) / p * link.beta;
}

double ring_all_reduce_seconds(const AlphaBeta& link, double n, int p) {
  return 2 * ring_gather_seconds(link, n, p);
}

}  // namespace st
