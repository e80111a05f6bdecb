#include "core/model/param_slice.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace st {

Shape slice_shape(const std::string& name, const Shape& whole, const Placement& p, int ranks) {
  ST_CHECK(ranks >= 1, "{}: {} tensor-parallel ranks", name, ranks);
  if (p.kind == Placement::Kind::replicate || ranks == 1) return whole;
  if (p.dim < 0 || size_t(p.dim) >= whole.size())
    fail_input("{}: split along dimension {} of a {}-dimensional parameter", name, p.dim,
               whole.size());
  const int64_t extent = whole[size_t(p.dim)];
  const int64_t unit = p.parts * p.block * ranks;
  if (p.parts < 1 || p.block < 1 || extent % unit != 0)
    fail_input(
        "{} {}: dimension {} ({}) does not split into {} part(s) of {} ranks' pieces in "
        "blocks of {}",
        name, shape_string(whole), p.dim, extent, p.parts, ranks, p.block);
  Shape s = whole;
  s[size_t(p.dim)] = extent / ranks;
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
  const int64_t extent = whole[size_t(p.dim)], segment = extent / p.parts, piece = segment / ranks;
  run_ = piece * inner;
  parts_ = p.parts;
  outer_stride_ = extent * inner;
  part_stride_ = segment * inner;
  offset_ = int64_t(t) * piece * inner;
}

SlicePlace slice_place(const Shape& whole, const Placement& p, int ranks, int64_t global) {
  const int64_t numel = shape_numel(whole);
  ST_CHECK(global >= 0 && global < numel, "element {} of a parameter of {}", global, numel);
  if (p.kind == Placement::Kind::replicate || ranks == 1) return {0, global, numel - global};
  int64_t inner = 1;
  for (size_t d = size_t(p.dim) + 1; d < whole.size(); ++d) inner *= whole[d];
  const int64_t extent = whole[size_t(p.dim)], segment = extent / p.parts * inner;
  const int64_t run = segment / ranks;
  const int64_t outer = global / (extent * inner), in_outer = global % (extent * inner);
  const int64_t part = in_outer / segment, in_segment = in_outer % segment;
  const int64_t rank = in_segment / run, in_run = in_segment % run;
  return {int(rank), (outer * p.parts + part) * run + in_run, run - in_run};
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
    s.shape = slice_shape(s.name, s.shape, s.placement, ranks);
    s.tp_rank = t;
    s.tp_ranks = ranks;
  }
}

}  // namespace st
