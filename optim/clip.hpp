#pragma once
// Gradient clipping by global norm, where each rank of a group holds part of the gradients
// (its shards): one all-reduce of the squared norms, a finite check, one scale.
#include <span>
#include <string_view>
#include <vector>

#include "collectives/process_group.hpp"
#include "optim/optim_param.hpp"

namespace st {

// Sums this rank's squared gradients over `group` with one FP64 all-reduce, in which `riders`
// (other per-rank sums, e.g. the loss) travel along and come back summed. A norm that is not
// finite is an Error starting with `context`; otherwise every gradient is scaled by
// clip_factor(norm, max_norm). Returns the global norm before clipping. Collective.
double clip_grad_norm(const std::vector<OptimParam>& params, double max_norm, ProcessGroup& group,
                      std::span<double> riders, std::string_view context);

// The same norm without scaling anything: for optimizers that take clip_factor(norm, max_norm)
// into their own pass over the gradients (Optimizer::step's grad_scale).
double global_grad_norm(const std::vector<OptimParam>& params, ProcessGroup& group,
                        std::span<double> riders, std::string_view context);

// Sum over all spans of grad^2 (in double), this process's part of the global norm (spans
// norm_counted_elsewhere left out).
double grad_sum_of_squares(const std::vector<OptimParam>& params);
// Multiplies every gradient by `factor`.
void scale_grads(const std::vector<OptimParam>& params, float factor);
// Clip factor for a global norm: min(1, max_norm / (norm + 1e-6)); max_norm <= 0 disables it.
float clip_factor(double global_norm, double max_norm);

}  // namespace st
