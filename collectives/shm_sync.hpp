#pragma once
// Counters in shared memory that ranks on one node publish and wait for (the shm algorithms).
#include <immintrin.h>
#include <sched.h>

#include <atomic>
#include <cstdint>

namespace st {

inline uint64_t load_acquire(uint64_t* p) {
  return std::atomic_ref<uint64_t>(*p).load(std::memory_order_acquire);
}
inline void store_release(uint64_t* p, uint64_t v) {
  std::atomic_ref<uint64_t>(*p).store(v, std::memory_order_release);
}

// Spins briefly, then yields: ranks may outnumber cores.
template <class Ready>
void spin_until(Ready&& ready) {
  for (int spins = 0; !ready(); ++spins) {
    if (spins < 2000)
      _mm_pause();
    else
      sched_yield();
  }
}

}  // namespace st
