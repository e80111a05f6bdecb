#include "core/model/param_spec.hpp"

#include <algorithm>

#include "core/rng.hpp"

namespace st {

void init_param_elements(const ParamSpec& spec, uint64_t seed, uint64_t param_index, uint64_t first,
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

}  // namespace st
