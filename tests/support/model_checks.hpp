#pragma once
// What the whole-model tests share: random token batches, masters moved off their init, and
// every parameter's gradient against central finite differences of the loss.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/model/model.hpp"
#include "core/rng.hpp"
#include "tests/grad_check.hpp"
#include "tests/support/local_params.hpp"

namespace st::testing {

inline Batch random_batch(int64_t B, int64_t T, uint64_t seed, int64_t V = 256) {
  Batch b{Tensor::empty("in", {B, T}, DType::i32), Tensor::empty("tg", {B, T}, DType::i32)};
  for (int64_t i = 0; i < B * T; ++i) {
    b.inputs.data<int32_t>()[i] = int32_t(uniform_int_at(seed, 1, uint64_t(i), uint64_t(V)));
    b.targets.data<int32_t>()[i] = int32_t(uniform_int_at(seed, 2, uint64_t(i), uint64_t(V)));
  }
  return b;
}

// Moves every master away from its init (so norms and biases are not trivial).
inline void perturb(LocalParams& params, size_t count, float scale) {
  for (size_t i = 0; i < count; ++i) {
    Tensor m = params.master(i);
    auto noise = randn(size_t(m.numel()), 100 + i, scale);
    for (int64_t j = 0; j < m.numel(); ++j) m.data<float>()[j] += noise[size_t(j)];
  }
  params.cast_for_compute();
}

// Every parameter's analytic gradient (forward_backward at 1 / tokens) against central
// differences of forward_loss / tokens, at about 12 elements of each.
inline void expect_model_gradients(Model& model, LocalParams& params, const Batch& batch,
                                   double atol = 5e-4, double rtol = 3e-2) {
  const double tokens = double(batch.inputs.numel());
  const size_t n_params = model.param_specs().size();
  UnitHooks hooks;
  params.zero_grads();
  model.forward_backward(batch, float(1.0 / tokens), hooks);
  std::vector<std::vector<float>> analytic;
  for (size_t i = 0; i < n_params; ++i) {
    Tensor g = params.grad(i);
    analytic.emplace_back(g.data<float>(), g.data<float>() + g.numel());
  }
  for (size_t i = 0; i < n_params; ++i) {
    Tensor m = params.master(i);
    std::vector<float> x(m.data<float>(), m.data<float>() + m.numel());
    auto loss = [&] {
      std::copy(x.begin(), x.end(), m.data<float>());
      return model.forward_loss(batch, hooks) / tokens;
    };
    const size_t stride = std::max<size_t>(1, x.size() / 12);
    expect_gradient(model.param_specs()[i].name, x, analytic[i], loss, 1e-2f, atol, rtol, stride);
    std::copy(x.begin(), x.end(), m.data<float>());
  }
}

// The same FP32 masters computed in FP32 and in BF16: BF16 keeps 8 mantissa bits (relative
// rounding 2^-9 = 0.2% per rounding); through ~10 roundings on the way to the loss we allow 1%
// on the loss and ask the gradients to point the same way (cosine > 0.99) at the same size.
inline void expect_bf16_close_to_fp32(Model& m32, LocalParams& p32, Model& m16, LocalParams& p16,
                                      const Batch& batch) {
  UnitHooks hooks;
  p32.zero_grads();
  p16.zero_grads();
  const float scale = float(1.0 / double(batch.inputs.numel()));
  const double l32 = m32.forward_backward(batch, scale, hooks);
  const double l16 = m16.forward_backward(batch, scale, hooks);
  EXPECT_NEAR(l16 / l32, 1.0, 0.01);
  double dot = 0, n32 = 0, n16 = 0;
  for (size_t i = 0; i < m32.param_specs().size(); ++i) {
    const float* a = p32.grad(i).data<float>();
    const float* b = p16.grad(i).data<float>();
    for (int64_t j = 0; j < p32.grad(i).numel(); ++j) {
      dot += double(a[j]) * b[j];
      n32 += double(a[j]) * a[j];
      n16 += double(b[j]) * b[j];
    }
  }
  EXPECT_GT(dot / std::sqrt(n32 * n16), 0.99);
  EXPECT_NEAR(std::sqrt(n16 / n32), 1.0, 0.02);
}

}  // namespace st::testing
