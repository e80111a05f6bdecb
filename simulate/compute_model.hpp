#pragma once
// Compute time per micro-batch of a model at a given rows per rank and threads per rank:
// measured (a calibration profile of the same family, shapes, rows and threads), scaled (a
// profile of other shapes, rows or family: its measured matmul rate carries the model's own
// matmul FLOPs, its measured rate over the rest carries the model's own elementwise bytes,
// both from Model::work), or from a machine's stated rates (no profile).
#include <optional>
#include <string>
#include <vector>

#include "core/model/model.hpp"
#include "models/family.hpp"
#include "simulate/cluster.hpp"
#include "simulate/profile.hpp"

namespace st {

struct ComputeShape {
  ProfiledModel model;  // the family, shapes (vocab padded), checkpointing and param dtype
  int64_t rows = 1;     // sequences per rank per micro-batch
  int threads = 1;
  // The model's work at `rows` (Model::work); absent: profiled_work(model, rows).
  std::optional<ModelWork> work;
  int tp = 1;  // tensor parallelism: never the profile's own measurement (taken at tp 1)
};

// The work of the model a profile describes, at `rows`, built through the family registry.
// Profiles record the keys every family reads, so their family has no keys of its own.
ModelWork profiled_work(const ProfiledModel& model, int64_t rows);

// A micro-batch's segments (blocks 1..L) and the rest of a step's compute.
struct ComputeTimes : SegmentTimes {
  double optimizer_per_element = 0;
  // Encoding or decoding one value of a quantized collective (sharding.*_quantization): the
  // bytes it moves (kCodecBytesPerValue) at the rate the model's elementwise work runs.
  double codec_per_value = 0;
  double step_overhead = 0;
  std::string source;  // how they were obtained, for the report
};

// An encoded value's traffic: an FP32 value read (twice: its block's scale, then its code)
// and a byte written; a decoded one's byte read and a BF16 or FP32 value written or added.
constexpr double kCodecBytesPerValue = 6;

// The times for `shape` on one rank of `cluster` (its profile, when it names one, is `profile`),
// as if the rank had its threads' cores: the engine shares a machine's cores among its ranks.
// From a profile, the sample measured with as many ranks per core as the cluster has, up to
// one core per thread (beyond that the time slicing is the engine's to add, not the sample's).
ComputeTimes compute_times(const ComputeShape& shape, const ClusterSpec& cluster,
                           const CalibrationProfile* profile);

}  // namespace st
