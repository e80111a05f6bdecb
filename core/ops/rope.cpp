#include "core/ops/rope.hpp"

#include <cmath>

#include "core/error.hpp"
#include "core/op_profile.hpp"
#include "core/ops/elementwise.hpp"

namespace st {
namespace {

// out = the rotation (sign 1) or its inverse (sign −1, the transpose) of the first `heads`
// heads of x, the rest of each row copied; out may be x. Each pair (a, b) of a head becomes
// (a·cos − sign·b·sin, b·cos + sign·a·sin).
template <class In, class Out>
void rotate_all(Out* out, const In* x, int64_t B, int64_t T, int64_t heads, int64_t row_stride,
                const RopeTable& table, float sign) {
  ST_CHECK(table.T >= T && table.head_size % 2 == 0, "rope: a table of {} positions for {}",
           table.T, T);
  const int64_t hs = table.head_size, half = hs / 2;
  const bool copy_rest = static_cast<const void*>(out) != static_cast<const void*>(x);
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < B * T; ++row) {
    const float* cos = table.cos.data() + (row % T) * half;
    const float* sin = table.sin.data() + (row % T) * half;
    for (int64_t h = 0; h < heads; ++h) {
      const In* a = x + row * row_stride + h * hs;
      Out* o = out + row * row_stride + h * hs;
#pragma omp simd
      for (int64_t i = 0; i < half; ++i) {
        const float x1 = to_f32(a[i]), x2 = to_f32(a[i + half]), s = sign * sin[i];
        o[i] = from_f32<Out>(x1 * cos[i] - x2 * s);
        o[i + half] = from_f32<Out>(x2 * cos[i] + x1 * s);
      }
    }
    if (copy_rest)
      for (int64_t c = heads * hs; c < row_stride; ++c)
        out[row * row_stride + c] = from_f32<Out>(to_f32(x[row * row_stride + c]));
  }
}

}  // namespace

RopeTable rope_table(int64_t T, int64_t head_size, double theta) {
  ST_CHECK(head_size % 2 == 0, "rope: head size {} must be even", head_size);
  RopeTable table{T, head_size, {}, {}};
  const int64_t half = head_size / 2;
  table.cos.resize(size_t(T * half));
  table.sin.resize(size_t(T * half));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const double angle = double(t) * std::pow(theta, -2.0 * double(i) / double(head_size));
      table.cos[size_t(t * half + i)] = float(std::cos(angle));
      table.sin[size_t(t * half + i)] = float(std::sin(angle));
    }
  return table;
}

void rope_forward(void* x, int64_t B, int64_t T, int64_t heads, int64_t row_stride,
                  const RopeTable& table, DType dtype) {
  OpScope scope(OpKind::rope);
  dispatch_float(dtype, [&]<class X>(X) {
    rotate_all(static_cast<X*>(x), static_cast<const X*>(x), B, T, heads, row_stride, table, 1.0f);
  });
}

void rope_backward(void* d_x, const float* d_y, int64_t B, int64_t T, int64_t heads,
                   int64_t row_stride, const RopeTable& table, DType dtype) {
  OpScope scope(OpKind::rope);
  dispatch_float(dtype, [&]<class X>(X) {
    rotate_all(static_cast<X*>(d_x), d_y, B, T, heads, row_stride, table, -1.0f);
  });
}

}  // namespace st
