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
    case InitKind::normal:
      fill_normal(dst, n, seed, param_index, first, 0.f, spec.init_std);
      return;
  }
}

}  // namespace st
