#include "launch/peak.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/ops/elementwise.hpp"
#include "core/ops/matmul.hpp"
#include "core/rng.hpp"
#include "core/tensor.hpp"
#include "core/timer.hpp"

namespace st {

std::string MatmulShape::describe() const {
  return fmt::format("{}x{}x{}", m, k, n);
}

namespace {

double best_gflops(DType dtype, const MatmulShape& s, int trials, const PeakTrialSync& sync) {
  const int64_t inputs = std::max(s.m * s.k, s.k * s.n);
  Tensor a32 = Tensor::empty("peak.inputs_f32", {inputs}, DType::f32);
  fill_normal(a32.data<float>(), size_t(inputs), 1, 1, 0, 0.f, 1.f);
  Tensor a = Tensor::empty("peak.inputs", {inputs}, dtype);  // both operands read it
  cast(a32.raw(), DType::f32, a.raw(), dtype, size_t(inputs));
  Tensor c = Tensor::empty("peak.output", {s.m, s.n}, DType::f32);
  const MatView lhs = MatView::row_major(a.raw(), dtype, s.m, s.k);
  const MatView rhs = MatView::row_major(a.raw(), dtype, s.k, s.n);
  const MatView out = MatView::row_major(c.raw(), DType::f32, s.m, s.n);
  gemm(1, lhs, rhs, out);  // warm-up and primitive creation
  double best = 0;
  for (int r = 0; r < trials; ++r) {
    if (sync.start) sync.start();
    Timer t;
    const int repeats = std::max(1, sync.repeats);
    for (int k = 0; k < repeats; ++k) gemm(1, lhs, rhs, out);
    if (sync.finish) sync.finish();
    const double seconds = sync.slowest ? sync.slowest(t.seconds()) : t.seconds();
    best = std::max(best, 2.0 * repeats * double(s.m) * double(s.k) * double(s.n) / seconds / 1e9);
  }
  return best;
}

}  // namespace

double measure_matmul_peak_gflops(DType dtype, const std::vector<MatmulShape>& shapes, int trials,
                                  const PeakTrialSync& sync) {
  double best = 0;
  for (const MatmulShape& s : shapes) best = std::max(best, best_gflops(dtype, s, trials, sync));
  return best;
}

}  // namespace st
