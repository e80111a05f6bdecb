#pragma once
// How a model's parameters are laid out into FSDP units: each unit is one flat buffer of its
// parameters in declaration order, padded to a multiple of the world size; rank r owns the
// contiguous slice [r * shard_numel, (r + 1) * shard_numel) of it.
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/param_spec.hpp"

namespace st {

// The part of one parameter that falls inside one rank's shard.
struct ShardSegment {
  size_t param;          // index into the model's ParamSpecs
  int64_t param_offset;  // first element within the parameter
  int64_t shard_offset;  // where it sits within the shard
  int64_t numel;
};

struct UnitLayout {
  int unit = 0;
  std::string name;                   // "transformer.h.3", or "root" for unit 0
  std::vector<size_t> params;         // indices into the model's ParamSpecs
  std::vector<int64_t> flat_offsets;  // offset of each of `params` within the flat buffer
  int64_t numel = 0;                  // real elements
  int64_t padded_numel = 0;           // world_size * shard_numel
  int64_t shard_numel = 0;

  // Which elements of which parameters rank `rank` owns, in shard order.
  std::vector<ShardSegment> segments(const std::vector<ParamSpec>& specs, int rank) const;
};

// Lays out every unit of `specs` for `world_size` ranks. A unit smaller than the world leaves
// the last ranks' shards all padding (as FSDP2 gives such ranks empty shards): they own no
// element of any parameter, yet take part in every collective of the unit.
std::vector<UnitLayout> layout_units(const std::vector<ParamSpec>& specs, int num_units,
                                     int world_size);

// Name of unit `unit` from its parameters' names ("transformer.h.3", or "root").
std::string unit_name(const std::vector<ParamSpec>& specs, const std::vector<size_t>& params,
                      int unit);

}  // namespace st
