#pragma once
// The part of a parameter one rank of a tensor-parallel group holds, by the parameter's
// placement (core/model/param_spec.hpp): its shape, and where each of its elements sits in the
// whole parameter. Initialization, checkpoints and Hugging Face files speak of whole parameters
// (global coordinates); a rank's memory holds its slice (local coordinates).
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/param_spec.hpp"

namespace st {

// Which slices a model is built of: tensor-parallel rank `rank` of `ranks` (1: whole), and
// whether its residual stream is split over the group too (sequence parallelism: each rank keeps
// its run of B·T / ranks rows between the blocks' matmuls; parameters are sliced alike).
struct TpSlice {
  int rank = 0;
  int ranks = 1;
  bool sequence_parallel = false;
};

// Into how many distinct pieces `p` cuts dimension p.dim of each segment over `ranks` ranks:
// `ranks`, or the segment's block count when the blocks are shared (Placement::shares_blocks and
// fewer blocks than ranks, dividing them); 1 for a replicated parameter. Rank t keeps piece
// t / (ranks / pieces).
int slice_pieces(const Shape& whole, const Placement& p, int ranks);

// The shape of one rank's slice of a parameter of shape `whole` placed by `p` over `ranks`
// ranks: dimension p.dim divided by `ranks` (a replicated parameter keeps its shape). Fails
// naming `name` when the split does not divide (each of p.parts segments into `ranks` pieces of
// whole multiples of p.block).
Shape slice_shape(const std::string& name, const Shape& whole, const Placement& p, int ranks);

// Where the elements of rank `t`'s slice sit in the whole parameter. The slice is runs of
// `run` consecutive elements of the whole parameter, in the whole's order; local element i is
// run i / run, at i % run within it.
class SliceMap {
 public:
  SliceMap(const Shape& whole, const Placement& p, int t, int ranks);
  // The slice `spec` is (its TP rank's; the identity for a whole or replicated parameter).
  explicit SliceMap(const ParamSpec& spec)
      : SliceMap(spec.whole_shape(), spec.placement, spec.tp_rank, spec.tp_ranks) {}
  int64_t run() const { return run_; }
  // The whole parameter's index of local element `local`.
  int64_t global(int64_t local) const {
    const int64_t k = local / run_, o = k / parts_, part = k % parts_;
    return o * outer_stride_ + part * part_stride_ + offset_ + local % run_;
  }

 private:
  int64_t run_ = 1, parts_ = 1, outer_stride_ = 0, part_stride_ = 0, offset_ = 0;
};

// Where element `global` of a whole parameter of shape `whole`, placed by `p` over `ranks`
// ranks, sits: on TP rank `rank` at local index `local`, with `run` - 1 more whole elements
// following it there contiguously (the rest of its run; to the end for a replicated parameter,
// held by every rank and named here as rank 0's; a shared block is named as the first of the
// ranks keeping it). The inverse of SliceMap::global.
struct SlicePlace {
  int rank = 0;
  int64_t local = 0;
  int64_t run = 1;
};
SlicePlace slice_place(const Shape& whole, const Placement& p, int ranks, int64_t global);

// Fails naming the first sliced parameter of `specs`: `what` reads or writes whole parameters
// only (safetensors exports, Hugging Face folders).
void check_not_sliced(const std::vector<ParamSpec>& specs, const char* what);

// The specs of rank `t`'s slices: each parameter's shape becomes its slice's, and the spec
// records the split (ParamSpec::tp_rank, tp_ranks) so initialization reads global indices.
void slice_param_specs(std::vector<ParamSpec>& specs, int t, int ranks);

}  // namespace st
