#include "core/model/param_slice.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace st {

int slice_pieces(const Shape& whole, const Placement& p, int ranks) {
  if (p.kind == Placement::Kind::replicate || ranks == 1) return 1;
  if (!p.shares_blocks || p.dim < 0 || size_t(p.dim) >= whole.size() || p.parts < 1 || p.block < 1)
    return ranks;
  const int64_t extent = whole[size_t(p.dim)];
  if (extent % (p.parts * p.block) != 0) return ranks;
  const int64_t blocks = extent / (p.parts * p.block);
  return blocks > 0 && blocks < ranks && ranks % blocks == 0 ? int(blocks) : ranks;
}

Shape slice_shape(const std::string& name, const Shape& whole, const Placement& p, int ranks) {
  ST_CHECK(ranks >= 1, "{}: {} tensor-parallel ranks", name, ranks);
  if (p.kind == Placement::Kind::replicate || ranks == 1) return whole;
  if (p.dim < 0 || size_t(p.dim) >= whole.size())
    fail_input("{}: split along dimension {} of a {}-dimensional parameter", name, p.dim,
               whole.size());
  const int64_t extent = whole[size_t(p.dim)];
  const int pieces = slice_pieces(whole, p, ranks);
  const int64_t unit = p.parts * p.block * pieces;
  if (p.parts < 1 || p.block < 1 || extent % unit != 0)
    fail_input(
        "{} {}: dimension {} ({}) does not split into {} part(s) of {} ranks' pieces in "
        "blocks of {}",
        name, shape_string(whole), p.dim, extent, p.parts, ranks, p.block);
  Shape s = whole;
  s[size_t(p.dim)] = extent / pieces;
  return s;
}

SliceMap::SliceMap(const Shape& whole, const Placement& p, int t, int ranks) {
  ST_CHECK(t >= 0 && t < ranks, "tensor-parallel rank {} of {}", t, ranks);
  if (p.kind == Placement::Kind::replicate || ranks == 1) {
    run_ = std::max<int64_t>(shape_numel(whole), 1);
    return;
  }
  slice_shape("parameter", whole, p, ranks);  // checks the split
  int64_t inner = 1;
  for (size_t d = size_t(p.dim) + 1; d < whole.size(); ++d) inner *= whole[d];
  const int pieces = slice_pieces(whole, p, ranks);
  const int64_t extent = whole[size_t(p.dim)], segment = extent / p.parts, piece = segment / pieces;
  run_ = piece * inner;
  parts_ = p.parts;
  outer_stride_ = extent * inner;
  part_stride_ = segment * inner;
  offset_ = int64_t(t / (ranks / pieces)) * piece * inner;
}

SlicePlace slice_place(const Shape& whole, const Placement& p, int ranks, int64_t global) {
  const int64_t numel = shape_numel(whole);
  ST_CHECK(global >= 0 && global < numel, "element {} of a parameter of {}", global, numel);
  if (p.kind == Placement::Kind::replicate || ranks == 1) return {0, global, numel - global};
  int64_t inner = 1;
  for (size_t d = size_t(p.dim) + 1; d < whole.size(); ++d) inner *= whole[d];
  const int pieces = slice_pieces(whole, p, ranks);
  const int64_t extent = whole[size_t(p.dim)], segment = extent / p.parts * inner;
  const int64_t run = segment / pieces;
  const int64_t outer = global / (extent * inner), in_outer = global % (extent * inner);
  const int64_t part = in_outer / segment, in_segment = in_outer % segment;
  const int64_t piece = in_segment / run, in_run = in_segment % run;
  return {int(piece * (ranks / pieces)), (outer * p.parts + part) * run + in_run, run - in_run};
}

void check_not_sliced(const std::vector<ParamSpec>& specs, const char* what) {
  for (const ParamSpec& s : specs)
    if (s.sliced())
      fail_input(
          "{}: '{}' is tensor-parallel rank {}'s slice of {}; {} reads and writes whole "
          "parameters only",
          what, s.name, s.tp_rank, shape_string(s.whole_shape()), what);
}

void slice_param_specs(std::vector<ParamSpec>& specs, int t, int ranks) {
  for (ParamSpec& s : specs) {
    ST_CHECK(s.tp_ranks == 1, "{} is sliced already", s.name);
    const Shape whole = s.shape;
    s.shape = slice_shape(s.name, whole, s.placement, ranks);
    s.tp_rank = t;
    s.tp_ranks = ranks;
    s.tp_replicas = s.placement.kind == Placement::Kind::replicate
                        ? ranks
                        : ranks / slice_pieces(whole, s.placement, ranks);
  }
}

}  // namespace st
