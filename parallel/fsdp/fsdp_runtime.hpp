#pragma once
// The FSDP runtime: FP32 master shards per unit, BF16 (param_dtype) all-gather before a unit
// runs, FP32 reduce-scatter of its gradients after its backward, prefetch and overlap. It is a
// UnitHooks, so a model drives it simply by announcing where each unit starts and ends.
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "collectives/process_group.hpp"
#include "core/model/model.hpp"
#include "core/ops/quantize.hpp"
#include "parallel/device_mesh.hpp"
#include "parallel/fsdp/buffer_pool.hpp"
#include "parallel/fsdp/schedule.hpp"
#include "parallel/fsdp/unit_layout.hpp"
#include "parallel/fsdp/unit_topology.hpp"

namespace st {

enum class Accumulation {
  reduce_each,  // reduce-scatter every micro-batch into the FP32 shard: least memory
  reduce_last,  // keep unsharded FP32 gradients, reduce once on the last micro-batch
};
const char* accumulation_name(Accumulation a);

// Whether a rank's backward accumulates straight into its FP32 gradient shards: alone in its
// shard group (the shard is the whole unit) with no quantized reduction, there is nothing to
// reduce-scatter, so no unsharded gradient buffer and no reduce-scatter (a copy) exist; with
// replicas (DDP) the shard itself is then summed over them. Not for reduce_each over several
// micro-batches, which sums each micro-batch's gradient before adding it: in place would add
// product by product, in another order.
bool gradients_in_place(int shard_ranks, bool quantized_reduce, Accumulation accumulation,
                        int micro_batches);

// With replicas (HSDP, DDP): when gradient shards are all-reduced across the replica group.
enum class ReplicaSync {
  each,  // after every micro-batch's reduce-scatter
  last,  // once, after the last micro-batch (cross-replica bytes fall by the micro-batch count)
};
const char* replica_sync_name(ReplicaSync s);

struct FsdpOptions {
  DType param_dtype = DType::bf16;    // what units are gathered and computed in
  bool reshard_after_forward = true;  // ZeRO-3 (true) or ZeRO-2 (false)
  // N > 1 (with reshard_after_forward): after a block's forward each rank keeps a 1/N slice of
  // its gathered parameters, so its backward all-gathers them within a group of N consecutive
  // shard ranks (ideally one node) instead of the whole shard group: FSDP2's integer
  // reshard_after_forward, ZeRO++'s hpZ. The same bytes arrive, from nearer. 0: off.
  int reshard_to = 0;
  // ZeRO++'s quantized collectives, for shard or replica groups that span nodes (none: BF16
  // gathers and FP32 reductions, exactly). gather: every all-gather of the shard group carries
  // blockwise INT8 of the FP32 master shards, decoded to param_dtype on arrival (qwZ).
  // reduce: gradients summed in FP32 within each node, then exchanged across nodes as blockwise
  // INT8/INT4 and summed in FP32 (qgZ; each value quantized once); a replica group's all-reduce
  // as a quantized all-to-all and all-gather (each value quantized twice).
  Quantization gather_quantization = Quantization::none;
  Quantization reduce_quantization = Quantization::none;
  int prefetch = 1;  // units whose all-gather is in flight ahead of compute
  Accumulation accumulation = Accumulation::reduce_each;
  double timeout_s = kDefaultTimeoutS;           // the watchdog's limit per collective
  ReplicaSync replica_sync = ReplicaSync::each;  // with a replica group
  // Unsharded parameters and gradients in the shard group's symmetric memory, so its
  // shared-memory collectives read peers in place (one copy a byte; false: staged, two).
  bool symmetric_memory = true;
  // Pipeline parallelism: the units this rank's stages hold (empty: every unit). The others
  // are laid out (checkpoints' coordinates) but have no memory here. A runtime holding a subset
  // runs steps as hold_for_step says, not through the unit hooks.
  std::vector<int> held_units = {};
  // With held_units: the pipeline rank holding each unit (the first one, for the root unit
  // the first and the last hold). Checkpoints gather every unit's shards on pipeline rank 0.
  std::vector<int> unit_owner = {};
};

// One parameter's part of this rank's shard: what an optimizer updates.
struct ShardSpan {
  std::string name;
  Tensor master;  // FP32
  Tensor grad;    // FP32
  bool weight_decay = false;
  int unit = 0;
  int64_t shard_offset = 0;  // where the span starts within this rank's shard of its unit
  size_t param = 0;          // index into the model's ParamSpecs
  int64_t param_offset = 0;  // the span's first element within its parameter
};

struct CommStats {
  double exposed_ms = 0;     // compute thread blocked waiting for a collective
  double collective_ms = 0;  // the collectives' own running time on the communication thread
  int64_t gathered_bytes = 0, scattered_bytes = 0, replicated_bytes = 0;
  int64_t gathers = 0, scatters = 0, replications = 0;
  // Bytes are what the collectives carry: encoded bytes where quantized, and a quantized
  // reduction's node-local reduce-scatter and its all-to-all both count as scattered bytes.
  // Of the gathers, those of reshard_to's slices within its group (their bytes are counted in
  // gathered_bytes too).
  int64_t regathered_bytes = 0, regathers = 0;
  // Tensor parallelism's collectives inside the model's compute (ShardedModel adds them): the
  // compute's time blocked in them (all of theirs), and their buffers' bytes.
  double tp_exposed_ms = 0;
  int64_t tp_bytes = 0, tp_collectives = 0;
};

struct FsdpMemory {
  int64_t shard_bytes = 0;           // FP32 master + gradient shards, padding included
  int64_t unsharded_peak_bytes = 0;  // gathered parameters and unsharded gradients (and
                                     // reshard_to's kept slices), peak since the last reset
};

// Which collectives the quantization options change.
struct QuantizedPlan {
  bool gather = false;      // the shard group's all-gathers
  int reduce_per_node = 0;  // > 0: the shard group's reduce-scatters, hierarchical over nodes of
                            // this many consecutive ranks
  bool replicas = false;    // the replica group's all-reduce
};
// The ranks per node when `nodes` (a group's node of each rank) are equal blocks of consecutive
// ranks on distinct nodes, else 0.
int ranks_per_node_block(const std::vector<int>& nodes);
// Where `gather` and `reduce` apply, from the nodes of the shard group's ranks and of the replica
// group's (empty without replicas): to groups that span nodes. An InputError naming the key
// where an option would change nothing or the node layout does not allow it.
QuantizedPlan plan_quantization(Quantization gather, Quantization reduce,
                                const std::vector<int>& shard_nodes,
                                const std::vector<int>& replica_nodes);

// The schedule (parallel/fsdp/schedule.hpp) these options give a step of `micro_batches`: the
// runtime's and the simulator's replay's, from this one derivation.
ScheduleShape schedule_shape(int prefetch, bool reshard_after_forward, int reshard_to,
                             Accumulation accumulation, int micro_batches);

// An InputError naming sharding.reshard_after_forward unless `reshard_to` (N) divides a shard
// group of `shard_size` ranks and lies between 2 and half of it.
void check_reshard_to(int reshard_to, int shard_size);

class FsdpRuntime final : public UnitHooks {
 public:
  // Lays out `model`'s units over the mesh's shard group and materializes this rank's FP32
  // master shards from the counter-based RNG (each element a function of seed, parameter and
  // global index, so every world size starts from the same weights). Nothing unsharded is
  // allocated. With a replica group (HSDP, DDP) each gradient shard is then all-reduced across
  // it (options.replica_sync says how often). hpZ's and the quantized collectives' groups are
  // the mesh's (made here, kept by the mesh, which must outlive the runtime).
  FsdpRuntime(Model& model, DeviceMesh& mesh, FsdpOptions options, uint64_t seed);
  ~FsdpRuntime() override;
  FsdpRuntime(const FsdpRuntime&) = delete;
  FsdpRuntime& operator=(const FsdpRuntime&) = delete;

  const std::vector<UnitLayout>& units() const { return layouts_; }
  const UnitTopology& topology() const { return topology_; }
  // What each hook does in a step of the micro-batches begin_step was given.
  const FsdpSchedule& schedule() const { return schedule_; }
  const FsdpOptions& options() const { return options_; }
  const Model& model() const { return model_; }
  ProcessGroup& group() { return group_; }
  ProcessGroup* replicas() { return replicas_; }
  // The ranks that hold one copy of the model between them (dp_shard x tp; the shard group for
  // tp = 1): rank r holds TP rank r % tp()'s slices and shard r / tp() of each of their units.
  // Checkpoints are written and read over it.
  ProcessGroup& model_group() { return model_group_; }
  int tp() const { return tp_; }
  // reshard_to's group (N consecutive ranks of the shard group), or nullptr.
  ProcessGroup* reshard_group() { return reshard_group_; }
  // Which collectives are quantized (options.*_quantization where they apply).
  const QuantizedPlan& quantized() const { return quantized_; }

  // A training step of `micro_batches` micro-batches begins.
  void begin_step(int micro_batches);
  // Micro-batch `micro` (0-based) of the step begins.
  void begin_micro_batch(int micro);
  // After the last micro-batch: waits for every reduce-scatter; the gradient shards are final.
  void finish_backward();
  // After forward-only passes (evaluation): frees every unsharded buffer still held.
  void reshard_all();

  // Pipeline parallelism (torchtitan's choice): the stages' micro-batches interleave forwards
  // and backwards, so each held unit is gathered once a step, kept, and bound with an FP32
  // unsharded gradient (`with_grad`) that every micro-batch adds into; reduce_held_units then
  // reduce-scatters each once (then finish_backward, then release with reshard_all). Costs
  // the stages' unsharded parameters and gradients for the whole step.
  void hold_for_step(bool with_grad);
  void reduce_held_units();
  bool holds(int unit) const { return units_[size_t(unit)].master.defined(); }
  // Pipeline parallelism: this rank's pipeline group (nullptr without), and which of its ranks
  // holds unit `unit`.
  ProcessGroup* pipeline_group() const { return pipeline_; }
  int unit_owner(int unit) const {
    return options_.unit_owner.empty() ? 0 : options_.unit_owner[size_t(unit)];
  }
  // This rank's FP32 gradient shard of a held unit (padding included).
  const Tensor& grad_shard(int unit) const { return units_[size_t(unit)].grad; }

  // This rank's (master, grad) spans, one per parameter it owns a part of, padding excluded.
  std::vector<ShardSpan> spans() const;
  // The whole FP32 master of parameter `index`, gathered from every rank. A collective: every
  // rank calls it. For tests and export; allocates the unit's full FP32 size while it runs.
  Tensor gather_master(size_t index);

  FsdpMemory memory() const;
  const CommStats& comm() const { return comm_; }
  void reset_comm() { comm_ = {}; }
  void reset_memory_peak() {
    pool_.reset_peak();
    replica_pool_.reset_peak();
  }

  void before_forward(int unit) override;
  void after_forward(int unit) override;
  void before_backward(int unit) override;
  void after_backward(int unit) override;

 private:
  struct Unit {
    Tensor master, grad;              // FP32 [shard_numel]: this rank's part
    Tensor full;                      // param_dtype [padded_numel] while gathered
    std::shared_ptr<Work> gathering;  // pending all-gather into `full` (or `encoded`)
    Tensor encoded;    // u8 [size * quantized_bytes(shard)]: a quantized gather in flight
    Tensor full_grad;  // FP32 [padded_numel] during backward (`grad` itself when in place)
    Tensor kept;  // param_dtype [padded_numel / reshard_to]: this rank's slice, forward to backward
  };
  // A unit's gradient on its way to the shard: reduce-scatter within the shard group, then
  // (with replicas, when this micro-batch syncs) an all-reduce of the result across replicas.
  // Each is one or more stages: a stage runs on the compute thread once the previous stage's
  // collective is done, and returns the next collective (or nullptr).
  struct Reduction;
  using Stage = std::function<std::shared_ptr<Work>(Reduction&)>;
  struct Reduction {
    int unit;
    std::shared_ptr<Work> work;  // the collective in flight
    // Issued before `work` on the same group (so done by the time it is): waited for with it.
    std::vector<std::shared_ptr<Work>> earlier;
    std::deque<Stage> stages;  // what follows it
    Tensor full_grad;          // FP32 [padded]: the reduce-scatter's input
    Tensor target;             // FP32 [shard]: the gradient shard, or `partial`
    Tensor partial;  // FP32 [shard]: added into the gradient shard when done (or undefined)
    bool partial_shared = false;  // `partial` from replica_pool_ (summed over replicas in place)
    Tensor send, recv, sum;       // a quantized stage's buffers
  };

  AllGatherOptions gather_options() const { return {options_.timeout_s}; }
  // gradients_in_place for this runtime's groups and step.
  bool grads_in_place() const;
  void issue_gather(int unit);
  void wait_and_bind(int unit, bool with_grad);
  void release_full(int unit);
  // reshard_to: keeps this rank's slice of the gathered unit, then frees the rest.
  void keep_slice(int unit);
  void drop_kept_slices();
  void issue_regather(int unit);
  // Waits for a unit's pending gather; a quantized one is decoded into `full` (`decode`).
  void finish_gather(int unit, bool decode);
  void issue_reduce(int unit);
  // The reduce-scatter of r.full_grad into r.target: hierarchical and quantized across nodes
  // (QuantizedPlan::reduce_per_node), else one reduce-scatter.
  std::shared_ptr<Work> start_reduce_scatter(Reduction& r);
  // The replica all-reduce of r.target, quantized where QuantizedPlan::replicas says.
  std::shared_ptr<Work> start_replica_sync(Reduction& r);
  void release(Tensor& buffer);
  // Completes finished reductions in order; with `block`, all of them.
  void drain_reductions(bool block);
  void add_partial(Reduction& r);
  void timed_wait(Work& work);
  // The schedule's actions for `hook` of `unit` in this micro-batch.
  void run_schedule(Hook hook, int unit);
  FsdpSchedule make_schedule() const;
  void reserve_symmetric_buffers();
  // Room for every held gradient shard in the replica group's symmetric memory; false where
  // the shards stay ordinary memory (no replicas, symmetric memory off, quantized replicas).
  bool reserve_replica_gradients();
  void allocate_full_grad(int unit);
  // A model's hook call must be the next unit of `order` (the root restarts it).
  void check_order(const std::vector<int>& order, size_t& next, int unit, const char* phase);

  Model& model_;
  ProcessGroup& group_;
  ProcessGroup* replicas_;
  ProcessGroup& model_group_;
  int tp_ = 1;
  FsdpOptions options_;
  ProcessGroup* reshard_group_ = nullptr;
  ProcessGroup* pipeline_ = nullptr;
  QuantizedPlan quantized_;
  // Hierarchical quantized reductions: the ranks of this rank's node within the shard group, and
  // the ranks at this rank's position on every node (one per node).
  ProcessGroup *node_group_ = nullptr, *column_group_ = nullptr;
  std::vector<UnitLayout> layouts_;
  std::vector<Unit> units_;
  UnitTopology topology_;
  FsdpSchedule schedule_{UnitTopology::root_and_chain(1),
                         ScheduleShape{}};       // made in the constructor
  size_t next_forward_ = 0, next_backward_ = 0;  // positions in its orders, for the check
  BufferPool pool_;
  // Partial sums that replicas on one node all-reduce (reduce_each, replica_sync each), from
  // their group's symmetric memory; replica_grads_shared_: the gradient shards are there too.
  BufferPool replica_pool_;
  bool replica_grads_shared_ = false;
  // By shard size: the partial sums the room holds, and those alive now (beyond the room a
  // partial sum is ordinary memory, so replica_pool_ only ever holds symmetric buffers).
  std::map<int64_t, int> partial_room_, partials_alive_;
  std::deque<Reduction> reductions_;
  int micro_batches_ = 1, micro_ = 0;
  CommStats comm_;
};

}  // namespace st
