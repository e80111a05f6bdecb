#pragma once
// One span an optimizer updates: an FP32 master (a whole parameter or this rank's shard of it)
// and its FP32 gradient. Anything else is rejected when the span is made, naming the parameter.
#include <string>
#include <vector>

#include "core/tensor.hpp"

namespace st {

struct OptimParam {
  std::string name;
  Tensor master;  // FP32, updated in place
  Tensor grad;    // FP32, same element count
  bool weight_decay = false;
  // A copy that other ranks of the norm's group hold as well (a parameter replicated over a
  // tensor-parallel group, on every TP rank but the first): left out of the global norm's sum,
  // so that each element counts once.
  bool norm_counted_elsewhere = false;
};

// Validates dtypes, devices and sizes; throws an Error naming the parameter and what it holds.
OptimParam make_optim_param(std::string name, Tensor master, Tensor grad, bool weight_decay);

}  // namespace st
