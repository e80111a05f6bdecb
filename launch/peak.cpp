#include "launch/peak.hpp"

#include <algorithm>
#include <vector>

#include "core/ops/elementwise.hpp"
#include "core/ops/matmul.hpp"
#include "core/rng.hpp"
#include "core/tensor.hpp"
#include "core/timer.hpp"

namespace st {

double measure_matmul_peak_gflops(DType dtype, int64_t n, int repeats) {
  Tensor a32 = Tensor::empty("peak.a", {n, n}, DType::f32);
  fill_normal(a32.data<float>(), size_t(n * n), 1, 1, 0, 0.f, 1.f);
  Tensor a = Tensor::empty("peak.a", {n, n}, dtype);
  cast(a32.raw(), DType::f32, a.raw(), dtype, size_t(n * n));
  Tensor c = Tensor::empty("peak.c", {n, n}, DType::f32);
  const MatView view = MatView::row_major(a.raw(), dtype, n, n);
  const MatView out = MatView::row_major(c.raw(), DType::f32, n, n);
  gemm(1, view, view, out);  // warm-up and primitive creation
  std::vector<double> seconds;
  for (int r = 0; r < repeats; ++r) {
    Timer t;
    gemm(1, view, view, out);
    seconds.push_back(t.seconds());
  }
  std::sort(seconds.begin(), seconds.end());
  return 2.0 * double(n) * double(n) * double(n) / seconds[seconds.size() / 2] / 1e9;
}

}  // namespace st
