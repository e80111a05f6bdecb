#pragma once
// What one rank does in one training step, as the simulator replays it: the units' sizes, the
// FSDP options that shape the schedule, and the compute between the runtime's hooks.
#include <cstdint>
#include <vector>

#include "core/model/model.hpp"
#include "parallel/fsdp/fsdp_runtime.hpp"
#include "parallel/pipeline/schedule.hpp"
#include "parallel/pipeline/stage_partition.hpp"
#include "simulate/segment_times.hpp"

namespace st {

// Tensor parallelism's collectives in each segment of a micro-batch, in order (Model::work's).
struct TpCalls {
  std::vector<TpCollective> root_forward_pre, root_forward_post, root_backward_pre,
      root_backward_post, block_forward, block_backward;
};

struct UnitPlan {
  int64_t padded_numel = 0;  // the unsharded flat buffer (elements)
  int64_t shard_numel = 0;   // this rank's part
};

// Pipeline parallelism (parallel.pp > 1): the one schedule object's shape and the stages'
// blocks. Block k is FSDP unit k + 1 (Model::unit_of_block); the root (unit 0) is held by the
// first and the last pipeline rank. A rank replays its list of PipelineSchedule actions.
struct PipelinePlan {
  int ranks = 1;  // P; 1: no pipeline
  PipeSchedule schedule = PipeSchedule::one_f_one_b;
  int virtual_stages = 1;
  std::vector<StageRange> stages;  // P x V, in stage order
  double boundary_bytes = 0;       // one micro-batch's activation (or its gradient) on the wire
  // Of each block's backward, the share its weight-gradient matmuls take (zero bubble's weight
  // half): their FLOPs over the backward's; of the root's backward before the blocks (head and
  // loss), the head's weight gradient's share.
  double weight_share = 0.5;
  double head_weight_share = 0;
  // Per pipeline rank (its held units'): the optimizer's seconds and TP's shared-gradient sums'
  // bytes (StepPlan's optimizer and tp_shared_grad_bytes are for a rank holding every unit).
  std::vector<double> optimizer, tp_shared_grad_bytes;
};

struct StepPlan {
  std::vector<UnitPlan> units;  // unit 0 is the root (parallel/fsdp/unit_topology.hpp)
  int param_bytes = 2;          // bytes per element on the all-gather's wire (param_dtype)
  bool reshard_after_forward = true;
  int reshard_to = 0;  // N: a block's backward gathers within groups of N shard ranks (hpZ)
  // Quantized collectives where they apply (FsdpRuntime::quantized()): encoded bytes on the
  // wire, and their encoding and decoding on the compute thread at codec_seconds_per_value.
  QuantizedPlan quantized;
  Quantization gather_quantization = Quantization::none;
  Quantization reduce_quantization = Quantization::none;
  double codec_seconds_per_value = 0;
  int prefetch = 1;
  Accumulation accumulation = Accumulation::reduce_each;
  ReplicaSync replica_sync = ReplicaSync::each;
  bool replicated = false;  // a replica group of more than one rank (HSDP, DDP)
  int replicas = 1;         // its ranks
  // The replica group's FP32 all-reduce reads peers' gradient shards in place where the group
  // lies on one node (FsdpRuntime::reserve_replica_gradients): sharding.symmetric_memory.
  bool replicas_in_place = true;
  int micro_batches = 1;
  PipelinePlan pipeline;
  // Tensor parallelism: the TP group's ranks, each segment's collectives over it, and the
  // once-a-step sum of shared slices' gradients (KV heads kept by several ranks), bytes.
  int tp = 1;
  TpCalls tp_calls;
  double tp_shared_grad_bytes = 0;
  int threads = 1;  // each rank's compute threads (for a machine's cores shared by its ranks)
  // Seconds of compute on a rank's compute thread per micro-batch (one block per unit after
  // the root: compute.block_forward.size() == units.size() - 1), and per step.
  SegmentTimes compute;
  double optimizer = 0;      // norm, clip and AdamW over this rank's shard
  double step_overhead = 0;  // batch and bookkeeping, at the step's start
};

}  // namespace st
