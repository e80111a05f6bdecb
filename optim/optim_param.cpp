#include "optim/optim_param.hpp"

namespace st {

OptimParam make_optim_param(std::string name, Tensor master, Tensor grad, bool weight_decay) {
  auto check = [&](const Tensor& t, const char* role) {
    if (t.dtype() != DType::f32)
      fail(
          "optimizer parameter '{}': {} is {} but optimizers only take fp32 masters and fp32 "
          "gradients (cast with the precision policy, not here)",
          name, role, dtype_name(t.dtype()));
    if (t.is_meta())
      fail("optimizer parameter '{}': {} is on the meta device; materialize it first", name, role);
  };
  check(master, "the master weight");
  check(grad, "the gradient");
  if (master.numel() != grad.numel())
    fail("optimizer parameter '{}': master has {} elements but its gradient {}", name,
         master.numel(), grad.numel());
  return {std::move(name), std::move(master), std::move(grad), weight_decay};
}

double grad_sum_of_squares(const std::vector<OptimParam>& params) {
  double total = 0;
  for (const auto& p : params) {
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
