#include "optim/clip.hpp"

#include <cmath>

#include "core/op_profile.hpp"

namespace st {

double global_grad_norm(const std::vector<OptimParam>& params, ProcessGroup& group,
                        std::span<double> riders, std::string_view context) {
  OpScope scope(OpKind::optimizer);
  // [riders..., this rank's sum of squares]: one all-reduce carries them all.
  const int64_t n = int64_t(riders.size());
  Tensor sums = Tensor::empty("clip.sums", {n + 1}, DType::f64);
  double* v = sums.data<double>();
  std::copy(riders.begin(), riders.end(), v);
  v[n] = grad_sum_of_squares(params);
  {
    OpScope wait(OpKind::collective_wait);
    group.all_reduce(sums)->wait();
  }
  std::copy(v, v + n, riders.begin());
  const double norm = std::sqrt(v[n]);
  if (!std::isfinite(norm))
    fail_agreed("{}: the global gradient norm is not finite ({})", context, norm);
  return norm;
}

double clip_grad_norm(const std::vector<OptimParam>& params, double max_norm, ProcessGroup& group,
                      std::span<double> riders, std::string_view context) {
  const double norm = global_grad_norm(params, group, riders, context);
  OpScope scope(OpKind::optimizer);
  const float factor = clip_factor(norm, max_norm);
  if (factor != 1.0f) scale_grads(params, factor);
  return norm;
}

double grad_sum_of_squares(const std::vector<OptimParam>& params) {
  double total = 0;
  for (const auto& p : params) {
    if (p.norm_counted_elsewhere) continue;
    const float* g = p.grad.data<float>();
    const int64_t n = p.grad.numel();
    double sum = 0;
#pragma omp parallel for simd reduction(+ : sum) if (n > 65536)
    for (int64_t i = 0; i < n; ++i) sum += double(g[i]) * double(g[i]);
    total += sum;
  }
  return total;
}

void scale_grads(const std::vector<OptimParam>& params, float factor) {
  for (const auto& p : params) {
    float* g = p.grad.data<float>();
    const int64_t n = p.grad.numel();
#pragma omp parallel for simd if (n > 65536)
    for (int64_t i = 0; i < n; ++i) g[i] *= factor;
  }
}

float clip_factor(double global_norm, double max_norm) {
  if (max_norm <= 0 || global_norm <= max_norm) return 1.0f;
  return float(max_norm / (global_norm + 1e-6));
}

}  // namespace st
