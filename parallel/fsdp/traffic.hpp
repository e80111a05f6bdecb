#pragma once
// Bytes a training step moves over each link class (within a node, between nodes), whole job,
// predicted from the runtime's schedule: what the start-up summary prints and the mesh
// benchmark checks against the bytes that crossed the emulated links.
#include <cstdint>
#include <vector>

#include "core/dtype.hpp"
#include "parallel/device_mesh.hpp"
#include "parallel/fsdp/fsdp_runtime.hpp"
#include "parallel/fsdp/unit_layout.hpp"

namespace st {

struct TrafficInputs {
  const std::vector<UnitLayout>* units;  // laid out over the shard group
  MeshShape mesh;
  std::vector<int> nodes;  // node of each world rank
  DType param_dtype = DType::bf16;
  int micro_batches = 1;
  bool reshard_after_forward = true;
  int reshard_to = 0;  // N: the backward's all-gathers within groups of N consecutive shard ranks
  Accumulation accumulation = Accumulation::reduce_each;
  ReplicaSync replica_sync = ReplicaSync::each;
  Quantization gather_quantization = Quantization::none;  // where they apply (plan_quantization)
  Quantization reduce_quantization = Quantization::none;
  // Each rank's tensor-parallel collective payload per step (activations; 0 without TP):
  // all-reduces, or under sequence parallelism all-gathers and reduce-scatters.
  double tp_bytes = 0;
  bool tp_sequence_parallel = false;
};

struct Traffic {
  // Each rank's collective payload per step, as CommStats counts it: whole (unsharded)
  // buffers all-gathered and reduce-scattered, gradient-shard bytes all-reduced across replicas.
  int64_t gathered = 0, scattered = 0, replicated = 0;
  int64_t regathered = 0;  // of `gathered`, what reshard_to's groups gather (CommStats too)
  int64_t tp_reduced = 0;  // through the TP group's collectives (TrafficInputs::tp_bytes)
  // Pipeline parallelism: activations and their gradients this rank sends its neighbouring
  // stages (and the root unit's gradient shard between the end stages).
  int64_t pipeline_sent = 0;
  // Bytes sent over links per step, whole job: between ranks of one node, between nodes.
  int64_t intra_node = 0, inter_node = 0;
};

// All-gathers and reduce-scatters as rings (each of a group's p hops carries (p-1)/p of the
// buffer), all-reduces as Open MPI runs large ones (Rabenseifner's for power-of-two groups, a
// ring otherwise), all-to-alls as one piece from each rank to each other; bytes between ranks
// of one node (shared memory) count as intra-node. Quantized collectives carry their encoded
// bytes (core/ops/quantize), laid out as FsdpRuntime runs them.
Traffic predict_traffic(const TrafficInputs& in);

}  // namespace st
