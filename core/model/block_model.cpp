#include "core/model/block_model.hpp"

#include <fmt/format.h>

#include "core/op_profile.hpp"
#include "core/trace.hpp"

namespace st {

bool kept_per_block(ActivationCheckpointing mode, BlockTensor t) {
  switch (t) {
    case BlockTensor::output:
      return true;
    case BlockTensor::kept:
      return mode != ActivationCheckpointing::full;
    case BlockTensor::cheap:
      return mode == ActivationCheckpointing::none;
  }
  return true;
}

void BlockModel::set_block_work(ModelWork& w, SegmentWork per_token, double tokens) const {
  w.block_forward = {tokens * per_token.flops, tokens * per_token.bytes};
  w.block_backward = {2 * w.block_forward.flops, 2 * w.block_forward.bytes};
  if (mode_ == ActivationCheckpointing::full) {
    w.block_backward.flops += w.block_forward.flops;
    w.block_backward.bytes += w.block_forward.bytes;
  } else if (mode_ == ActivationCheckpointing::selective) {
    w.block_backward.bytes += w.block_forward.bytes / 2;
  }
}

void BlockModel::forward_blocks(UnitHooks& hooks, int64_t first, int64_t end) {
  if (end < 0) end = num_blocks();
  for (int64_t l = first; l < end; ++l) {
    hooks.before_forward(block_unit(l));
    block_forward(l, {mode_, false});
    hooks.after_forward(block_unit(l));
  }
}

void BlockModel::backward_blocks(UnitHooks& hooks, int64_t first, int64_t end) {
  if (end < 0) end = num_blocks();
  for (int64_t l = end - 1; l >= first; --l) {
    hooks.before_backward(block_unit(l));
    if (mode_ != ActivationCheckpointing::none) {
      // Its own phase in the step's breakdown (OpKind::recompute) and in traces.
      RecomputeScope recomputing;
      TraceScope span(TraceRecorder::active() ? fmt::format("recompute block {}", l) : "", true);
      block_forward(l, {mode_, true});
    }
    block_backward(l);
    hooks.after_backward(block_unit(l));
  }
}

}  // namespace st
