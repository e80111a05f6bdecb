#include "core/model/param_spec.hpp"

#include <algorithm>

#include "core/model/param_slice.hpp"
#include "core/rng.hpp"

namespace st {

namespace {

// Elements [first, first + n) of the whole parameter.
void init_whole_elements(const ParamSpec& spec, uint64_t seed, uint64_t param_index, uint64_t first,
                         size_t n, float* dst) {
  switch (spec.init) {
    case InitKind::zeros:
      std::fill(dst, dst + n, 0.f);
      return;
    case InitKind::ones:
      std::fill(dst, dst + n, 1.f);
      return;
    case InitKind::normal: {
      // Padding rows are zero; the real ones do not depend on how many rows pad them.
      const uint64_t real = uint64_t(spec.real_numel());
      const size_t drawn = first >= real ? 0 : size_t(std::min<uint64_t>(n, real - first));
      fill_normal(dst, drawn, seed, param_index, first, 0.f, spec.init_std);
      std::fill(dst + drawn, dst + n, 0.f);
      return;
    }
  }
}

}  // namespace

void init_param_elements(const ParamSpec& spec, uint64_t seed, uint64_t param_index, uint64_t first,
                         size_t n, float* dst) {
  if (!spec.sliced() || spec.init != InitKind::normal) {
    init_whole_elements(spec, seed, param_index, first, n, dst);
    return;
  }
  // Run by run of the slice, each a run of consecutive elements of the whole parameter.
  const SliceMap map(spec.whole_shape(), spec.placement, spec.tp_rank, spec.tp_ranks);
  for (uint64_t local = first, end = first + n; local < end;) {
    const uint64_t run_end = (local / uint64_t(map.run()) + 1) * uint64_t(map.run());
    const size_t count = size_t(std::min(run_end, end) - local);
    init_whole_elements(spec, seed, param_index, uint64_t(map.global(int64_t(local))), count,
                        dst + (local - first));
    local += count;
  }
}

}  // namespace st
