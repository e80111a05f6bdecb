#pragma once
// Central finite differences for the backward tests.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/rng.hpp"

namespace st::testing {

inline constexpr DType f32 = DType::f32;

inline std::vector<float> randn(size_t n, uint64_t stream, float std = 1.0f) {
  std::vector<float> v(n);
  fill_normal(v.data(), n, 2024, stream, 0, 0.f, std);
  return v;
}

// dot(a, b) in double: the scalar loss sum(out * weights) whose gradient w.r.t. out is weights.
inline double dot(const float* a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < b.size(); ++i) s += double(a[i]) * double(b[i]);
  return s;
}

// Compares analytic[i] with (loss(x[i] + eps) - loss(x[i] - eps)) / 2 eps for every
// `stride`-th element. Tolerance: |a - n| <= atol + rtol * |n|.
inline void expect_gradient(const std::string& what, std::vector<float>& x,
                            const std::vector<float>& analytic, const std::function<double()>& loss,
                            float eps = 1e-2f, double atol = 2e-3, double rtol = 2e-2,
                            size_t stride = 1) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < x.size(); i += stride) {
    const float saved = x[i];
    x[i] = saved + eps;
    const double up = loss();
    x[i] = saved - eps;
    const double down = loss();
    x[i] = saved;
    const double numeric = (up - down) / (2.0 * double(eps));
    if (std::fabs(analytic[i] - numeric) > atol + rtol * std::fabs(numeric) && failures++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: analytic " << analytic[i] << " vs numeric "
                    << numeric;
  }
  EXPECT_EQ(failures, 0) << what;
}

}  // namespace st::testing
