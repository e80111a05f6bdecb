#pragma once
// Rotary position embeddings as Hugging Face's Llama applies them (`rotate_half`): in each head
// of size d, element i and element i + d/2 (i < d/2) are rotated together by the angle
// t · theta^(-2i/d) of the token's position t.
#include <cstdint>
#include <vector>

#include "core/dtype.hpp"

namespace st {

// cos and sin of every (position, frequency) pair: [T, head_size / 2] each, FP32.
struct RopeTable {
  int64_t T = 0, head_size = 0;
  std::vector<float> cos, sin;
};
// Angles computed in double, then rounded once to FP32.
RopeTable rope_table(int64_t T, int64_t head_size, double theta);

// Rotates, in place, the first `heads` heads of every row of x [B, T, row_stride] (dtype): the
// rotation computes in FP32 and rounds once. In a packed Llama qkv row q's and k's heads come
// first and side by side, so one call rotates both.
void rope_forward(void* x, int64_t B, int64_t T, int64_t heads, int64_t row_stride,
                  const RopeTable& table, DType dtype);
// The backward: the inverse rotation of the first `heads` heads of the FP32 gradient d_y
// [B, T, row_stride], written with the rest of each row into `d_x` in dtype (rounded once, as
// the projections' backward matmuls read it). For FP32, d_x may be d_y.
void rope_backward(void* d_x, const float* d_y, int64_t B, int64_t T, int64_t heads,
                   int64_t row_stride, const RopeTable& table, DType dtype);

}  // namespace st
