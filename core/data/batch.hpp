#pragma once
// One micro-batch of token rows, as models consume it.
#include <cstdint>

#include "core/tensor.hpp"

namespace st {

// The tokens of one micro-batch: inputs and next-token targets, both int32 [B, T].
struct Batch {
  Tensor inputs;
  Tensor targets;
  int64_t B() const { return inputs.dim(0); }
  int64_t T() const { return inputs.dim(1); }
};

}  // namespace st
