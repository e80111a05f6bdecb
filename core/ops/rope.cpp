#include "core/ops/rope.hpp"

#include <cmath>

#include "core/error.hpp"
#include "core/op_profile.hpp"
#include "core/ops/elementwise.hpp"

namespace st {
namespace {

// (a, b) ← (a·cos − sign·b·sin, b·cos + sign·a·sin) for every pair of one head; sign −1 undoes
// the rotation (its transpose).
template <class T>
void rotate_head(T* __restrict head, const float* __restrict cos, const float* __restrict sin,
                 int64_t half, float sign) {
#pragma omp simd
  for (int64_t i = 0; i < half; ++i) {
    const float a = to_f32(head[i]), b = to_f32(head[i + half]);
    const float s = sign * sin[i];
    head[i] = from_f32<T>(a * cos[i] - b * s);
    head[i + half] = from_f32<T>(b * cos[i] + a * s);
  }
}

template <class T>
void rotate_all(T* x, int64_t B, int64_t T_, int64_t heads, int64_t row_stride,
                const RopeTable& table, float sign) {
  ST_CHECK(table.T >= T_ && table.head_size % 2 == 0, "rope: table of {} positions for {}", table.T,
           T_);
  const int64_t hs = table.head_size, half = hs / 2;
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < B * T_; ++row) {
    const int64_t t = row % T_;
    for (int64_t h = 0; h < heads; ++h)
      rotate_head(x + row * row_stride + h * hs, table.cos.data() + t * half,
                  table.sin.data() + t * half, half, sign);
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
    rotate_all(static_cast<X*>(x), B, T, heads, row_stride, table, 1.0f);
  });
}

void rope_backward(float* d_x, int64_t B, int64_t T, int64_t heads, int64_t row_stride,
                   const RopeTable& table) {
  OpScope scope(OpKind::rope);
  rotate_all(d_x, B, T, heads, row_stride, table, -1.0f);
}

}  // namespace st
