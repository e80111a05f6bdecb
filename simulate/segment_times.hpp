#pragma once
// A micro-batch's compute on one rank, seconds, in the segments the runtime's hooks cut it into
// (Model::work's segments): the root unit's parts around the chain of blocks, and each block's
// forward and backward. Measured by calibration (ComputeSample), predicted for a model
// (ComputeTimes) and replayed (StepPlan): one struct, carried whole.
#include <numeric>
#include <vector>

namespace st {

struct SegmentTimes {
  // The root is split where the blocks interrupt it: embedding before them, head and loss after
  // them (forward); head and loss before them, embedding after them (backward).
  double root_forward_pre = 0, root_forward_post = 0;
  double root_backward_pre = 0, root_backward_post = 0;
  std::vector<double> block_forward, block_backward;  // [k]: block k + 1, i.e. FSDP unit k + 1

  double total() const {
    return root_forward_pre + root_forward_post + root_backward_pre + root_backward_post +
           std::accumulate(block_forward.begin(), block_forward.end(), 0.0) +
           std::accumulate(block_backward.begin(), block_backward.end(), 0.0);
  }
  // Every segment times `factor` (the same work on fewer cores, say).
  void scale(double factor) {
    for (double* x :
         {&root_forward_pre, &root_forward_post, &root_backward_pre, &root_backward_post})
      *x *= factor;
    for (auto* v : {&block_forward, &block_backward})
      for (double& x : *v) x *= factor;
  }
};

}  // namespace st
