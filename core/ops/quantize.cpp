#include "core/ops/quantize.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/bf16.hpp"
#include "core/error.hpp"
#include "core/op_profile.hpp"

namespace st {
namespace {

int qmax(Quantization q) {
  return q == Quantization::int8 ? 127 : 7;
}

int64_t blocks(Quantization q, int64_t n) {
  return (n + quant_block(q) - 1) / quant_block(q);
}

// The scale of x[n]: its largest magnitude over qmax; NaN when a value is not finite.
float block_scale(const float* x, int64_t n, int q_max) {
  float amax = 0, probe = 0;  // probe: x·0 sums to 0, or to NaN once a value is Inf or NaN
#pragma omp simd reduction(max : amax) reduction(+ : probe)
  for (int64_t i = 0; i < n; ++i) {
    amax = std::max(amax, std::fabs(x[i]));
    probe += x[i] * 0.0f;
  }
  return probe == 0.0f ? amax / float(q_max) : std::numeric_limits<float>::quiet_NaN();
}

// round(x · inv) within ±q_max as an integer (ties to even).
inline int32_t encode(float x, float inv, float q_max) {
  return int32_t(std::clamp(std::nearbyint(x * inv), -q_max, q_max));
}

// Calls f(block index, first element, element count, its scale, its first value byte).
template <class F>
void for_blocks(Quantization q, int64_t n, F&& f) {
  const int64_t b = quant_block(q), nb = blocks(q, n);
#pragma omp parallel for schedule(static) if (n >= 65536)
  for (int64_t k = 0; k < nb; ++k) f(k, k * b, std::min(b, n - k * b));
}

// A block's integers as floats: INT8 as signed bytes, INT4 as offset nibbles (q + 8, 1..15).
void decode_block(Quantization q, const uint8_t* values, int64_t first, int64_t count, float* f) {
  if (q == Quantization::int8) {
    const int8_t* v = reinterpret_cast<const int8_t*>(values + first);
#pragma omp simd
    for (int64_t i = 0; i < count; ++i) f[i] = float(v[i]);
  } else {
    const uint8_t* v = values + first / 2;  // blocks are even-sized: each starts on a byte
#pragma omp simd
    for (int64_t i = 0; i < count / 2; ++i) {
      f[2 * i] = float(int(v[i] & 0xf) - 8);
      f[2 * i + 1] = float(int(v[i] >> 4) - 8);
    }
    if (count % 2) f[count - 1] = float(int(v[count / 2] & 0xf) - 8);
  }
}

// Calls f(first element, count, its values decoded) for each block of the encoding `in` of n
// values, blocks in parallel.
template <class F>
void for_decoded_blocks(Quantization q, const uint8_t* in, int64_t n, F&& f) {
  OpScope scope(OpKind::quantize);
  const float* scales = reinterpret_cast<const float*>(in);
  const uint8_t* values = in + 4 * blocks(q, n);
  for_blocks(q, n, [&](int64_t k, int64_t first, int64_t count) {
    float v[256];  // a block's values (quant_block is at most 256)
    decode_block(q, values, first, count, v);
    const float scale = scales[k];
#pragma omp simd
    for (int64_t i = 0; i < count; ++i) v[i] *= scale;
    f(first, count, v);
  });
}

}  // namespace

const char* quantization_name(Quantization q) {
  switch (q) {
    case Quantization::none:
      return "none";
    case Quantization::int8:
      return "int8";
    case Quantization::int4:
      return "int4";
  }
  return "?";
}

int64_t quant_block(Quantization q) {
  ST_CHECK(q != Quantization::none, "quant_block without a quantization");
  return q == Quantization::int8 ? 256 : 128;
}

size_t quantized_bytes(Quantization q, int64_t n) {
  const int64_t values = q == Quantization::int8 ? n : (n + 1) / 2;
  const int64_t bytes = 4 * blocks(q, n) + values;
  return size_t((bytes + 7) / 8 * 8);
}

void quantize_blocks(Quantization q, const float* x, int64_t n, uint8_t* out) {
  OpScope scope(OpKind::quantize);
  const int q_max = qmax(q);
  float* scales = reinterpret_cast<float*>(out);
  uint8_t* values = out + 4 * blocks(q, n);
  std::memset(values, 0, quantized_bytes(q, n) - size_t(4 * blocks(q, n)));
  for_blocks(q, n, [&](int64_t k, int64_t first, int64_t count) {
    const float scale = block_scale(x + first, count, q_max);
    scales[k] = scale;
    // A non-finite block keeps the codes above under its NaN scale (its values round to no
    // integer). A block of zeros, or of values so small that 1 / scale overflows (below about
    // 1e-36), is encoded as zeros under a zero scale.
    if (!std::isfinite(scale)) return;
    const float inv = 1.0f / scale;
    if (!(scale > 0) || !std::isfinite(inv)) {
      scales[k] = 0;
      if (q == Quantization::int4) std::memset(values + first / 2, 0x88, size_t(count + 1) / 2);
      return;
    }
    const float* xs = x + first;
    if (q == Quantization::int8) {
      int8_t* v = reinterpret_cast<int8_t*>(values + first);
#pragma omp simd
      for (int64_t i = 0; i < count; ++i) v[i] = int8_t(encode(xs[i], inv, 127.0f));
    } else {
      uint8_t* v = values + first / 2;
#pragma omp simd
      for (int64_t i = 0; i < count / 2; ++i)
        v[i] = uint8_t((encode(xs[2 * i], inv, 7.0f) + 8) |
                       ((encode(xs[2 * i + 1], inv, 7.0f) + 8) << 4));
      if (count % 2) v[count / 2] = uint8_t(encode(xs[count - 1], inv, 7.0f) + 8);
    }
  });
}

void dequantize_blocks(Quantization q, const uint8_t* in, int64_t n, void* out, DType dtype) {
  ST_CHECK(dtype == DType::f32 || dtype == DType::bf16, "dequantize into {}", dtype_name(dtype));
  for_decoded_blocks(q, in, n, [&](int64_t first, int64_t count, const float* v) {
    if (dtype == DType::f32)
      std::memcpy(static_cast<float*>(out) + first, v, size_t(count) * 4);
    else
      convert_f32_to_bf16(v, static_cast<bf16*>(out) + first, size_t(count));
  });
}

void dequantize_add(Quantization q, const uint8_t* in, int64_t n, float* out) {
  for_decoded_blocks(q, in, n, [&](int64_t first, int64_t count, const float* v) {
    float* o = out + first;
#pragma omp simd
    for (int64_t i = 0; i < count; ++i) o[i] += v[i];
  });
}

}  // namespace st
