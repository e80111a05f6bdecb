#pragma once
// The network engine: one training step of every simulated rank on a SimGrid platform. Each
// rank's threads are actors as in the runtime: a compute thread replaying the schedule
// (replay.hpp) and a communication thread per group (shard, replicas, world) running its
// queued collectives one at a time as point-to-point messages (rings; recursive doubling below
// 64 KiB, as Open MPI does for small operations), so link sharing between concurrent flows (HSDP's
// replica rings through one node link, a fat tree's oversubscribed core) comes from SimGrid's flow
// model. Every run is its own process, the shardtrain-simgrid helper: SimGrid's engine is one per
// process, and libsimgrid exports MPI's symbols (SMPI), so it is never linked into a program that
// runs Open MPI.
#include <cstdint>
#include <string>
#include <vector>

#include "parallel/device_mesh.hpp"
#include "simulate/alpha_beta.hpp"
#include "simulate/cluster.hpp"
#include "simulate/step_plan.hpp"
#include "simulate/symmetry.hpp"

namespace st {

// The links of a platform, resolved from a cluster (and its profile): per ring step (message)
// costs, end to end, for the two collective kinds (a reduce-scatter's larger β is the
// reduction's CPU time, added after each received message).
struct PlatformLinks {
  AlphaBeta intra_gather, intra_reduce;  // between two ranks of one node
  AlphaBeta inter_gather, inter_reduce;  // between ranks of two nodes
  // MPI's all-reduce of 64 KiB and more, per ring step (zero: a plain ring of the links above);
  // a group within one node takes the first, a group across nodes the second.
  AlphaBeta intra_all_reduce, inter_all_reduce;
  // The runtime's shared-memory window for single-node all-gathers and reduce-scatters of 64
  // KiB and more, per operation (α + n·β at 2 ranks; β scales by 2(p−1)/p); else rings.
  bool shm_window = false;
  AlphaBeta shm_gather, shm_reduce;
  FabricKind fabric = FabricKind::non_blocking;
  double oversubscription = 1;
  // Each rank has its own NIC into the fabric (inter_gather is its link), else each node one.
  bool nic_per_rank = false;
  // CPU time per byte a message between nodes costs each end (a TCP stack's copies), spent on
  // the machine's shared cores while the message moves; 0: none.
  double inter_cpu_per_byte = 0;
};

struct SimPlatform {
  int nodes = 1, ranks_per_node = 1;
  PlatformLinks links;
  // The cores one machine's ranks share (nodes_per_machine nodes: emulated hosts), or 0: no
  // sharing, every rank computes at its own pace. With cores, compute runs as executions on the
  // machine's CPU, split fairly while ranks x threads exceed it.
  int nodes_per_machine = 1;
  int machine_cores = 0;
  int world() const { return nodes * ranks_per_node; }
};

struct SimOptions {
  // Ring steps of one collective simulated message by message; the rest of a longer ring
  // takes the measured mean of those (every step of a ring moves the same bytes over the same
  // route classes). 0: all of them.
  int max_ring_steps = 6;
  // Simulate every node (else nodes that behave alike are simulated once: symmetry.hpp).
  bool every_node = false;
  // Record the spans of ranks 0..timeline_ranks-1: the job's ranks, so under folding only
  // those simulated appear (rank 0 always is; every_node for all of them).
  int timeline_ranks = 0;
  std::string engine;  // the shardtrain-simgrid program; empty: beside this one
};

struct SimSpan {
  int rank;
  bool comm;  // communication thread (else compute)
  std::string name;
  double begin, end;  // s
};

struct SimResult {
  double step = 0;          // the slowest rank's step, s
  double compute = 0;       // rank 0's compute
  double exposed = 0;       // rank 0's compute thread's waits on unit collectives (as metrics)
  double exposed_mean = 0;  // the mean over ranks
  double exposed_max = 0;   // the most any rank waited
  double tp_exposed = 0;    // rank 0's compute thread's time in TP collectives (all exposed)
  // Pipeline parallelism: the share of the schedule's time the ranks did not compute, as the
  // runtime's pp_bubble (1 - the ranks' mean compute in their actions / the longest run of
  // them); and the bytes the stages sent each other (activations, their gradients, the root's
  // gradient), whole job.
  double pp_bubble = 0;
  double pp_bytes = 0;
  std::string longest_wait;                 // the collective waited on longest (rank 0)
  double intra_bytes = 0, inter_bytes = 0;  // sent per step, whole job
  int64_t messages = 0;                     // simulated point-to-point messages
  int simulated_ranks = 0;                  // the ranks simulated (the others behave alike)
  double wall_seconds = 0;                  // the simulation's own running time
  std::vector<SimSpan> timeline;
};

// Where the engine is looked for by default: shardtrain-simgrid beside this program.
std::string default_engine_path();

// The groups a rank runs a communication thread (an actor) for: shard, replicas and world
// always; reshard groups only with reshard_to, node and column groups only with hierarchical
// quantized reductions (node groups when a node holds more than one rank of them).
bool group_has_thread(const StepPlan& plan, GroupKind kind);
// The most pipeline messages a rank has in flight at once (each an actor while it moves): a
// micro-batch's activation and gradient per virtual stage, at most.
int pipeline_sends(const StepPlan& plan);
// The ranks and groups the engine lays out (symmetry.hpp).
RankLayout rank_layout(const SimPlatform& platform, MeshShape mesh, const StepPlan& plan);

// What the engine will hold for a step, known before it starts: the ranks it simulates (nodes
// that behave alike once, unless every_node), their actors (a compute thread and a
// communication thread per group each), and its peak memory: 40 MiB of program and platform,
// 32 KiB a rank and 12 KiB an actor, a little above what shardtrain-simgrid was measured to
// take (1024 ranks of 4 actors: 101-110 MiB, estimated 120; of 7 actors: 139, estimated 156).
struct EngineFootprint {
  int simulated_ranks = 0;
  double actors = 0;
  double bytes = 0;
};
EngineFootprint engine_footprint(const SimPlatform& platform, MeshShape mesh, const StepPlan& plan,
                                 const SimOptions& options);

// Simulates one step of `plan` on every rank of `platform` with `mesh` (pp × replicate × shard ×
// tp = world, laid out as the runtime does: parallel/mesh_layout). An Error if it fails.
SimResult simulate_step(const SimPlatform& platform, MeshShape mesh, const StepPlan& plan,
                        const SimOptions& options = {});

}  // namespace st
