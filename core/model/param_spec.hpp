#pragma once
// What a model declares about each parameter, before any memory exists.
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.hpp"

namespace st {

enum class InitKind : uint8_t { normal, zeros, ones };

struct ParamSpec {
  std::string name;  // Hugging Face name, e.g. "transformer.h.0.attn.c_attn.weight"
  Shape shape;
  InitKind init = InitKind::zeros;
  float init_std = 0.f;  // for InitKind::normal (mean 0)
  bool weight_decay = false;
  int unit = 0;  // the FSDP unit this parameter belongs to
  int64_t numel() const { return shape_numel(shape); }
};

// Elements [first, first + n) of parameter `param_index`, each a pure function of
// (seed, param_index, element index): the same values whoever computes them, however split.
void init_param_elements(const ParamSpec& spec, uint64_t seed, uint64_t param_index, uint64_t first,
                         size_t n, float* dst);

}  // namespace st
