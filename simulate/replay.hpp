#pragma once
// The runtime's step, replayed: RankReplay runs, for one rank, the FSDP schedule FsdpRuntime
// executes (the same FsdpSchedule object, parallel/fsdp/schedule.hpp: which gathers, waits,
// frees and reductions each hook does) against a ReplayBackend that supplies time (compute,
// and collectives queued on one communication thread). It holds no tensors. What it adds is
// what each action moves and costs, mirrored from the runtime (tests/test_simulate.cpp's
// ReplayMirrorsTheRuntime checks the collectives issued, in order, against FsdpRuntime driven
// by a real model on a fake process group):
//   ShardedTrainer::step                  -> RankReplay::run_step
//   GPT::forward_backward's hook order    -> RankReplay::micro_batch
//   its TP collectives (Model::work's)     -> segment
//   the schedule's actions at each hook   -> run
//   FsdpRuntime::drain_reductions         -> drain_reductions (the stages after each collective)
//   FsdpRuntime::start_reduce_scatter     -> issue_reduce, advance (qgZ: node sums, exchange)
//   FsdpRuntime::start_replica_sync       -> advance          (all-reduce, or qgZ's two stages)
//   FsdpRuntime::finish_backward          -> drain_reductions(true)
//   ShardedTrainer::update                -> update           (loss + norm all-reduce, AdamW)
#include <deque>
#include <string>
#include <vector>

#include "simulate/step_plan.hpp"

namespace st {

enum class CollectiveKind { all_gather, reduce_scatter, all_reduce, all_to_all };
// reshard: sharding.reshard_after_forward = N's groups of N consecutive shard ranks (hpZ).
// node, column: quantized reductions' groups (a node's ranks of the shard group; the ranks at
// one place of every node). tp: the tensor-parallel group (parallel.tp consecutive ranks).
// pipeline: a rank's pipeline group (the ranks at its place in every stage; point-to-point
// messages only, posted by the compute thread as the runtime's MPI_Isend/MPI_Irecv are).
enum class GroupKind { shard, replicas, world, reshard, node, column, tp, pipeline };
inline constexpr int kGroupKinds = 8;
const char* collective_kind_name(CollectiveKind kind);

struct CollectiveCall {
  CollectiveKind kind;
  GroupKind group;
  double bytes;  // the whole buffer: unsharded for all-gather and reduce-scatter
  int unit;      // -1: not a unit's (loss and norm all-reduces)
  std::string label() const;
};

class ReplayBackend {
 public:
  virtual ~ReplayBackend() = default;
  // Queues `call` on the communication thread of its group on this rank (each group has its
  // own, as each ProcessGroup does: one operation at a time, in order, per group).
  virtual int issue(const CollectiveCall& call) = 0;
  virtual bool is_completed(int handle) = 0;
  virtual void wait(int handle) = 0;
  virtual void compute(double seconds, const char* what, int unit) = 0;
  virtual double now() = 0;
  // A message of `bytes` to, or from, pipeline rank `peer` of this rank's pipeline group,
  // matched by `tag`; in flight at once (as many as are posted), completed as issue()'s handles.
  virtual int send(int peer, int tag, double bytes);
  virtual int recv(int peer, int tag, double bytes);
};

class RankReplay {
 public:
  // `pp_rank`: the rank's place in its pipeline group (plan.pipeline.ranks > 1).
  RankReplay(const StepPlan& plan, ReplayBackend& backend, int pp_rank = 0);
  void run_step();
  // Time the compute thread spent blocked on unit collectives (the runtime's exposed_ms), and
  // the call it waited on longest.
  double exposed() const { return exposed_; }
  // Time it spent in tensor parallelism's collectives (the runtime's tp_exposed_ms: all of
  // their time, as each blocks the compute).
  double tp_exposed() const { return tp_exposed_; }
  // The schedule it replays: the one FsdpRuntime executes for the plan's options.
  const FsdpSchedule& schedule() const { return schedule_; }
  const std::string& longest_wait() const { return longest_wait_label_; }
  // Pipeline parallelism: the time the schedule's actions took on this rank, and the part of
  // it they computed (the runtime's PipelineStats step_ms and compute_ms).
  double pipeline_time() const { return pipeline_time_; }
  double pipeline_compute() const { return pipeline_compute_; }

 private:
  struct Unit {
    bool full = false;     // gathered or in flight
    bool kept = false;     // reshard_to: this rank's slice kept from the forward
    bool encoded = false;  // a quantized gather: decoded when waited for
    int gathering = -1;    // pending all-gather
  };
  // What a reduction does once its collective in flight is done.
  enum class Next { exchange, sum, replicas, replica_sum, replica_decode, done };
  struct Reduction {
    int unit = 0;
    int work = -1;             // the collective in flight (-1: none)
    std::vector<int> earlier;  // issued before `work` on its group, waited with it
    CollectiveCall call{};     // what `work` is, for the exposed-wait record
    Next next = Next::done;
    bool sync_replicas = false;
  };

  void micro_batch();
  // ShardedModel's pipelined step (simulate/pipeline_replay.cpp): hold_for_step's gathers,
  // PipelineRuntime::run's actions, reduce_held_units, sum_root_gradient.
  void pipelined_step();
  std::vector<int> held_units() const;
  void pipeline_actions();
  void stage_compute(const PipeAction& a);
  void sum_root_gradient();
  // A segment of a micro-batch: its compute, cut into equal pieces around its TP collectives.
  void segment(double seconds, const std::vector<TpCollective>& tp, const char* what, int unit);
  void update();
  void run(Hook hook, int u);
  void issue_gather(int u);
  void wait_and_bind(int u, bool decode = true);
  // Runs a reduction's next stage: its compute, and the collective it issues (if any).
  void advance(Reduction& r);
  double codec(double values) const { return values * plan_.codec_seconds_per_value; }
  void release_full(int u);
  void issue_reduce(int u);
  void drain_reductions(bool block);
  void timed_wait(int handle, const CollectiveCall& call);
  void tp_wait(int handle);  // a TP collective: the compute waits for all of it

  const StepPlan& plan_;
  ReplayBackend& backend_;
  std::vector<Unit> units_;
  FsdpSchedule schedule_;
  std::deque<Reduction> reductions_;
  int micro_ = 0;
  int pp_rank_ = 0;
  double pipeline_time_ = 0, pipeline_compute_ = 0;
  double exposed_ = 0, longest_wait_ = 0, tp_exposed_ = 0;
  std::string longest_wait_label_;
};

}  // namespace st
