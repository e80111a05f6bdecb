#pragma once
// Counter-based RNG (Philox-4x32-10). The value at (seed, stream, index) is a pure function of
// those three numbers, so any split of the work across threads or ranks draws the same values.
#include <array>
#include <cstddef>
#include <cstdint>

namespace st {

// One Philox-4x32-10 block: counter (c0..c3) under key (k0, k1).
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

// 128 random bits for block `block` of `stream` under `seed`.
std::array<uint32_t, 4> random_block(uint64_t seed, uint64_t stream, uint64_t block);

// Uniform in (0, 1] from 32 random bits.
inline double uniform_open0(uint32_t bits) {
  return (double(bits) + 1.0) * 0x1p-32;
}

// A standard normal sample for element `index` (Box-Muller; 4 samples per Philox block).
float normal_at(uint64_t seed, uint64_t stream, uint64_t index);

// dst[i] = mean + std * normal_at(seed, stream, first_index + i), in parallel.
void fill_normal(float* dst, size_t n, uint64_t seed, uint64_t stream, uint64_t first_index,
                 float mean, float std);

// A uniform integer in [0, bound) for element `index` (bound > 0).
uint64_t uniform_int_at(uint64_t seed, uint64_t stream, uint64_t index, uint64_t bound);

}  // namespace st
