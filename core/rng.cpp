#include "core/rng.hpp"

#include <cmath>
#include <numbers>

namespace st {

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(kMul0) * c[0];
    const uint64_t p1 = uint64_t(kMul1) * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k[1],
         uint32_t(p0)};
    k[0] += kWeyl0;
    k[1] += kWeyl1;
  }
  return c;
}

std::array<uint32_t, 4> random_block(uint64_t seed, uint64_t stream, uint64_t block) {
  return philox4x32_10(
      {uint32_t(block), uint32_t(block >> 32), uint32_t(stream), uint32_t(stream >> 32)},
      {uint32_t(seed), uint32_t(seed >> 32)});
}

namespace {
// The four normals of one block: (r1 cos, r1 sin, r2 cos, r2 sin).
std::array<float, 4> normals_of_block(uint64_t seed, uint64_t stream, uint64_t block) {
  const auto bits = random_block(seed, stream, block);
  constexpr double two_pi = 2.0 * std::numbers::pi;
  const double r1 = std::sqrt(-2.0 * std::log(uniform_open0(bits[0])));
  const double r2 = std::sqrt(-2.0 * std::log(uniform_open0(bits[2])));
  const double t1 = two_pi * uniform_open0(bits[1]);
  const double t2 = two_pi * uniform_open0(bits[3]);
  return {float(r1 * std::cos(t1)), float(r1 * std::sin(t1)), float(r2 * std::cos(t2)),
          float(r2 * std::sin(t2))};
}
}  // namespace

float normal_at(uint64_t seed, uint64_t stream, uint64_t index) {
  return normals_of_block(seed, stream, index / 4)[index % 4];
}

void fill_normal(float* dst, size_t n, uint64_t seed, uint64_t stream, uint64_t first_index,
                 float mean, float std) {
  if (n == 0) return;
  // Block by block: each Philox block and its Box-Muller pair computed once for its four
  // elements (element by element computed every block four times: 4x the time of a large
  // model's initialization), the same values as normal_at.
  const int64_t first_block = int64_t(first_index / 4);
  const int64_t last_block = int64_t((first_index + n - 1) / 4);
#pragma omp parallel for schedule(static) if (n > 4096)
  for (int64_t b = first_block; b <= last_block; ++b) {
    const std::array<float, 4> z = normals_of_block(seed, stream, uint64_t(b));
    for (uint64_t j = 0; j < 4; ++j) {
      const uint64_t index = uint64_t(b) * 4 + j;
      if (index >= first_index && index < first_index + n)
        dst[index - first_index] = mean + std * z[j];
    }
  }
}

uint64_t uniform_int_at(uint64_t seed, uint64_t stream, uint64_t index, uint64_t bound) {
  const auto bits = random_block(seed, stream, index);
  const uint64_t x = (uint64_t(bits[0]) << 32) | bits[1];
  // 64 random bits reduced by a 128-bit multiply: bias below 2^-32 for bounds < 2^32.
  return uint64_t((unsigned __int128)x * bound >> 64);
}

}  // namespace st
