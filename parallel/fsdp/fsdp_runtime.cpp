#include "parallel/fsdp/fsdp_runtime.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>

#include <fmt/ranges.h>

#include "core/op_profile.hpp"
#include "core/ops/elementwise.hpp"
#include "core/timer.hpp"
#include "core/trace.hpp"

namespace st {

const char* accumulation_name(Accumulation a) {
  return a == Accumulation::reduce_each ? "reduce_each" : "reduce_last";
}

const char* replica_sync_name(ReplicaSync s) {
  return s == ReplicaSync::each ? "each" : "last";
}

void check_reshard_to(int N, int S) {
  if (N >= 2 && N < S && S % N == 0) return;
  // The valid N: the divisors of S from 2 to S / 2, found in pairs up to its square root.
  std::vector<int> valid;
  for (int d = 2; int64_t(d) * d <= S; ++d)
    if (S % d == 0) {
      valid.push_back(d);
      if (d != S / d) valid.push_back(S / d);
    }
  std::sort(valid.begin(), valid.end());
  const std::string options =
      "true (reshards to the whole shard group) or false (keeps whole units)";
  if (valid.empty())
    fail_input(
        "sharding.reshard_after_forward = {}: a shard group of {} rank{} has no divisor N with "
        "2 <= N < {} to reshard to; the options here are {}",
        N, S, S == 1 ? "" : "s", S, options);
  std::string list = fmt::format("{}", fmt::join(valid.begin(), valid.end() - 1, ", "));
  list += (list.empty() ? "" : " or ") + std::to_string(valid.back());
  fail_input(
      "sharding.reshard_after_forward = {} must be a divisor of the shard group's {} ranks below "
      "{}: {} (a smaller group for the backward's all-gathers, e.g. the ranks of a node); or {}",
      N, S, S, list, options);
}

int ranks_per_node_block(const std::vector<int>& nodes) {
  const int n = int(nodes.size());
  int per = 1;
  while (per < n && nodes[size_t(per)] == nodes[0]) ++per;
  if (n % per != 0) return 0;
  std::vector<int> seen;
  for (int b = 0; b < n / per; ++b) {
    const int node = nodes[size_t(b * per)];
    if (std::find(seen.begin(), seen.end(), node) != seen.end()) return 0;
    seen.push_back(node);
    for (int i = 0; i < per; ++i)
      if (nodes[size_t(b * per + i)] != node) return 0;
  }
  return per;
}

namespace {
bool spans(const std::vector<int>& nodes) {
  return std::any_of(nodes.begin(), nodes.end(), [&](int n) { return n != nodes.front(); });
}
std::string ranks_text(size_t n) {
  return fmt::format("{} rank{}", n, n == 1 ? "" : "s");
}
std::string node_list(const std::vector<int>& nodes) {
  return fmt::format("[{}]", fmt::join(nodes, ", "));
}

}  // namespace

QuantizedPlan plan_quantization(Quantization gather, Quantization reduce,
                                const std::vector<int>& shard_nodes,
                                const std::vector<int>& replica_nodes) {
  QuantizedPlan plan;
  const bool shard_spans = spans(shard_nodes), replica_spans = spans(replica_nodes);
  constexpr const char* kEmulate = "sharding.ranks_per_node emulates nodes on one host";
  if (gather != Quantization::none) {
    if (!shard_spans)
      fail_input(
          "sharding.gather_quantization = {} quantizes all-gathers between nodes, but the shard "
          "group ({}) lies on one node: nothing would change; set none, or shard across nodes "
          "({})",
          quantization_name(gather), ranks_text(shard_nodes.size()), kEmulate);
    plan.gather = true;
  }
  if (reduce != Quantization::none) {
    if (!shard_spans && !replica_spans)
      fail_input(
          "sharding.reduce_quantization = {} quantizes reductions between nodes, but the shard "
          "group ({}) and the replica group ({}) each lie on one node: nothing would change; "
          "set none, or span nodes ({})",
          quantization_name(reduce), ranks_text(shard_nodes.size()),
          ranks_text(std::max<size_t>(1, replica_nodes.size())), kEmulate);
    if (shard_spans) {
      plan.reduce_per_node = ranks_per_node_block(shard_nodes);
      if (plan.reduce_per_node == 0)
        fail_input(
            "sharding.reduce_quantization = {} sums within each node before crossing nodes, so "
            "the shard group's ranks must sit on their nodes in equal blocks of consecutive "
            "ranks; their nodes are {}",
            quantization_name(reduce), node_list(shard_nodes));
    }
    plan.replicas = replica_spans;
  }
  return plan;
}

FsdpRuntime::FsdpRuntime(Model& model, DeviceMesh& mesh, FsdpOptions options, uint64_t seed)
    : model_(model),
      group_(mesh.shard_group()),
      replicas_(mesh.replica_group()),
      model_group_(mesh.model_group()),
      tp_(mesh.shape().tp),
      options_(options) {
  if (!options_.held_units.empty()) pipeline_ = mesh.pipeline_group();
  ProcessGroup& group = group_;
  ST_CHECK(model_group_.size() == group.size() * tp_ &&
               model_group_.rank() == group.rank() * tp_ + mesh.tp_rank(),
           "the model group's rank {} of {} is not shard {} x TP rank {} of {}",
           model_group_.rank(), model_group_.size(), group.rank(), mesh.tp_rank(), tp_);
  if (replicas_ && replicas_->size() == 1) replicas_ = nullptr;
  if (options_.param_dtype != model.compute_dtype())
    fail("FSDP param_dtype {} differs from the model's compute dtype {}",
         dtype_name(options_.param_dtype), dtype_name(model.compute_dtype()));
  if (options_.prefetch < 0) fail_input("prefetch depth {} must be >= 0", options_.prefetch);
  if (options_.reshard_to != 0) {
    check_reshard_to(options_.reshard_to, group.size());
    options_.reshard_after_forward = true;
    reshard_group_ = &mesh.shard_block_group(options_.reshard_to);  // rank r keeps slice r % N
  }
  quantized_ =
      plan_quantization(options_.gather_quantization, options_.reduce_quantization, group.nodes(),
                        replicas_ ? replicas_->nodes() : std::vector<int>{});
  if (const int L = quantized_.reduce_per_node) {
    const DeviceMesh::NodeGroups groups = mesh.shard_node_groups(L);
    node_group_ = groups.node;
    column_group_ = groups.across_nodes;
  }
  const auto& specs = model.param_specs();
  layouts_ = layout_units(specs, model.num_units(), group.size());
  units_.resize(layouts_.size());
  for (int u : options_.held_units)
    ST_CHECK(u >= 0 && u < int(layouts_.size()), "held unit {} of {}", u, layouts_.size());
  replica_grads_shared_ = reserve_replica_gradients();
  for (size_t u = 0; u < layouts_.size(); ++u) {
    const UnitLayout& layout = layouts_[u];
    Unit& unit = units_[u];
    const auto& held = options_.held_units;
    if (!held.empty() && std::find(held.begin(), held.end(), int(u)) == held.end()) continue;
    // Zeros first: the padding at the end of the last shard must stay zero.
    unit.master = Tensor::zeros(layout.name + ".master_shard", {layout.shard_numel}, DType::f32);
    if (replica_grads_shared_) {
      unit.grad =
          replicas_->symmetric_empty(layout.name + ".grad_shard", layout.shard_numel, DType::f32);
      unit.grad.zero_();
    } else {
      unit.grad = Tensor::zeros(layout.name + ".grad_shard", {layout.shard_numel}, DType::f32);
    }
    float* master = unit.master.data<float>();
    for (const ShardSegment& s : layout.segments(specs, group.rank()))
      init_param_elements(specs[s.param], seed, s.param, uint64_t(s.param_offset), size_t(s.numel),
                          master + s.shard_offset);
  }
  topology_ = UnitTopology::root_and_chain(int(units_.size()));
  schedule_ = make_schedule();
  reserve_symmetric_buffers();
}

namespace {
// What a buffer of `bytes` takes in symmetric memory (the heap's 64-byte alignment).
size_t heap_room(size_t bytes) {
  return (bytes + 63) / 64 * 64;
}
}  // namespace

bool FsdpRuntime::reserve_replica_gradients() {
  // The replica sync's FP32 all-reduce of each gradient shard reads the peers' shards in place
  // when they lie in the replica group's symmetric memory (its replicas on one node: DDP, or
  // HSDP within a node). MPI's own all-reduce polls on the communication thread through
  // every fragment's hand-off, and where a rank's cores are shared with its compute that
  // polling slowed DDP's backward by 12% (docs/sharding-and-precision.md). A group across
  // nodes reserves nothing and its shards are ordinary memory. Room too for the partial sums
  // that later micro-batches all-reduce under reduce_each and replica_sync each: a few of each
  // size in flight, as the shard group's gradient buffers (a buffer that does not fit is
  // ordinary memory, summed by MPI: only slower).
  if (!replicas_ || !options_.symmetric_memory || quantized_.replicas) return false;
  const auto& held = options_.held_units;
  std::map<int64_t, int> units_of_size;
  size_t bytes = 0;  // before the shards exist, so by held_units rather than holds()
  for (size_t u = 0; u < layouts_.size(); ++u)
    if (held.empty() || std::find(held.begin(), held.end(), int(u)) != held.end()) {
      bytes += heap_room(size_t(layouts_[u].shard_numel) * 4);
      units_of_size[layouts_[u].shard_numel] += 1;
    }
  for (const auto& [numel, units] : units_of_size) {
    partial_room_[numel] = std::min(units, options_.prefetch + 3);
    bytes += size_t(partial_room_[numel]) * heap_room(size_t(numel) * 4);
  }
  replicas_->reserve_symmetric(bytes);
  // Across nodes (or where the node's shared memory had no room) nothing was reserved.
  if (replicas_->symmetric_capacity() < bytes) return false;
  replica_pool_.set_shared_allocator([this](std::string name, int64_t numel, DType dtype) {
    return replicas_->symmetric_empty(std::move(name), numel, dtype);
  });
  return true;
}

void FsdpRuntime::reserve_symmetric_buffers() {
  // The unsharded parameters (all-gather outputs, gathered in place) and gradients
  // (reduce-scatter inputs) live where the shard group's peers read them in place. The pool
  // keeps one set of buffers per size: a few of each size are held at once (the one in use,
  // the prefetched ones, reductions in flight), or every unit's where the schedule keeps them
  // all (parameters without resharding after forward, gradients reduced once a step). Room
  // costs no memory until a buffer touches it. A buffer that does not fit is ordinary memory
  // and its collectives stage as before: only slower.
  if (group_.size() == 1 || !options_.symmetric_memory) return;
  std::map<int64_t, int> units_of_size;
  for (size_t u = 0; u < layouts_.size(); ++u)
    if (holds(int(u))) units_of_size[layouts_[u].padded_numel] += 1;
  ScheduleShape shape = schedule_.shape();
  if (!options_.held_units.empty())  // hold_for_step keeps every held unit's
    shape.reshard_after_forward = shape.reduce_each_micro_batch = false;
  const int held = options_.prefetch + 3;
  size_t bytes = 0;  // BF16 (param_dtype) parameters and FP32 gradients
  for (const auto& [numel, units] : units_of_size) {
    // Without resharding, backward waits on no all-gather queued behind the reduce-scatters,
    // so nothing bounds how many of those are in flight: room for every unit's.
    const bool bounded = shape.reshard_after_forward;
    const size_t params = size_t(bounded ? std::min(units, held) : units);
    const size_t grads =
        size_t(bounded && shape.reduce_each_micro_batch ? std::min(units, held) : units);
    bytes += params * heap_room(size_t(numel) * dtype_size(options_.param_dtype)) +
             grads * heap_room(size_t(numel) * 4);
  }
  group_.reserve_symmetric(bytes);
  pool_.set_shared_allocator([this](std::string name, int64_t numel, DType dtype) {
    return group_.symmetric_empty(std::move(name), numel, dtype);
  });
}

ScheduleShape schedule_shape(int prefetch, bool reshard_after_forward, int reshard_to,
                             Accumulation accumulation, int micro_batches) {
  return {.prefetch = prefetch,
          .reshard_after_forward = reshard_after_forward || reshard_to > 1,
          .keep_slices = reshard_to > 1,
          .reduce_each_micro_batch = accumulation == Accumulation::reduce_each,
          .micro_batches = micro_batches};
}

FsdpSchedule FsdpRuntime::make_schedule() const {
  return FsdpSchedule(topology_,
                      schedule_shape(options_.prefetch, options_.reshard_after_forward,
                                     options_.reshard_to, options_.accumulation, micro_batches_));
}

FsdpRuntime::~FsdpRuntime() {
  // Collectives still in flight write into buffers about to be freed: let them land.
  try {
    for (Unit& unit : units_)
      if (unit.gathering) unit.gathering->wait();
    for (Reduction& r : reductions_) {
      for (auto& w : r.earlier) w->wait();
      if (r.work) r.work->wait();
    }
  } catch (...) {
  }
  for (size_t i = 0; i < model_.param_specs().size(); ++i) model_.unbind(i);
}

void FsdpRuntime::begin_step(int micro_batches) {
  ST_CHECK(micro_batches >= 1, "micro_batches {} must be at least 1", micro_batches);
  micro_batches_ = micro_batches;
  micro_ = 0;
  if (schedule_.shape().micro_batches != micro_batches) schedule_ = make_schedule();
  // Slices kept by a forward without its backward (an evaluation) hold older weights.
  drop_kept_slices();
}

void FsdpRuntime::drop_kept_slices() {
  for (Unit& unit : units_)
    if (unit.kept.defined()) {
      pool_.release(std::move(unit.kept));
      unit.kept = Tensor();
    }
}

void FsdpRuntime::begin_micro_batch(int micro) {
  ST_CHECK(micro >= 0 && micro < micro_batches_, "micro-batch {} of {}", micro, micro_batches_);
  micro_ = micro;
}

void FsdpRuntime::timed_wait(Work& work) {
  TraceRecorder* trace = TraceRecorder::active();
  if (!work.is_completed()) {
    OpScope scope(OpKind::collective_wait);
    const double begin = trace_now_us();
    Timer clock;
    work.wait();
    comm_.exposed_ms += clock.ms();
    if (trace)
      trace->add("wait: " + work.description(), TraceTrack::compute, begin, trace_now_us());
  }
  work.wait();  // rethrows a failure
  comm_.collective_ms += (work.completed_us() - work.started_us()) / 1e3;
  // The communication thread runs operations one at a time: on its track they never overlap.
  if (trace)
    trace->add(work.description(), TraceTrack::comm, work.started_us(), work.completed_us());
}

void FsdpRuntime::issue_gather(int u) {
  Unit& unit = units_[size_t(u)];
  if (unit.full.defined()) return;  // gathered, or in flight
  if (unit.kept.defined()) return issue_regather(u);
  const UnitLayout& layout = layouts_[size_t(u)];
  const DType dtype = options_.param_dtype;
  unit.full = pool_.acquire_shared(layout.name + ".unsharded", layout.padded_numel, dtype);
  if (quantized_.gather) {
    // Each rank encodes its FP32 master shard; every rank (this one too) decodes all of them,
    // so all compute with the same weights.
    const Quantization q = options_.gather_quantization;
    const int64_t piece = int64_t(quantized_bytes(q, layout.shard_numel));
    unit.encoded = pool_.acquire(layout.name + ".encoded", piece * group_.size(), DType::u8);
    Tensor slot = unit.encoded.slice(group_.rank() * piece, (group_.rank() + 1) * piece);
    quantize_blocks(q, unit.master.data<float>(), layout.shard_numel, slot.data<uint8_t>());
    unit.gathering = group_.all_gather(slot, unit.encoded, gather_options());
    comm_.gathered_bytes += int64_t(unit.encoded.nbytes());
    comm_.gathers += 1;
    return;
  }
  // Cast this rank's FP32 master straight into its slot of the unsharded buffer, then gather
  // in place: no separate BF16 shard buffer exists.
  const int64_t first = int64_t(group_.rank()) * layout.shard_numel;
  Tensor slot = unit.full.slice(first, first + layout.shard_numel);
  cast(unit.master.raw(), DType::f32, slot.raw(), dtype, size_t(layout.shard_numel));
  unit.gathering = group_.all_gather(slot, unit.full, gather_options());
  comm_.gathered_bytes += int64_t(unit.full.nbytes());
  comm_.gathers += 1;
}

void FsdpRuntime::issue_regather(int u) {
  Unit& unit = units_[size_t(u)];
  const UnitLayout& layout = layouts_[size_t(u)];
  unit.full =
      pool_.acquire_shared(layout.name + ".unsharded", layout.padded_numel, unit.kept.dtype());
  const int64_t slice = unit.kept.numel(), first = int64_t(reshard_group_->rank()) * slice;
  Tensor slot = unit.full.slice(first, first + slice);
  std::memcpy(slot.raw(), unit.kept.raw(), size_t(slot.nbytes()));
  pool_.release(std::move(unit.kept));
  unit.kept = Tensor();
  unit.gathering = reshard_group_->all_gather(slot, unit.full, gather_options());
  comm_.gathered_bytes += int64_t(unit.full.nbytes());
  comm_.gathers += 1;
  comm_.regathered_bytes += int64_t(unit.full.nbytes());
  comm_.regathers += 1;
}

void FsdpRuntime::keep_slice(int u) {
  Unit& unit = units_[size_t(u)];
  if (!unit.full.defined()) return;
  finish_gather(u, true);
  const UnitLayout& layout = layouts_[size_t(u)];
  const int64_t slice = layout.padded_numel / options_.reshard_to;
  const int64_t first = int64_t(reshard_group_->rank()) * slice;
  unit.kept = pool_.acquire(layout.name + ".kept_slice", slice, unit.full.dtype());
  std::memcpy(unit.kept.raw(), unit.full.slice(first, first + slice).raw(),
              size_t(unit.kept.nbytes()));
  release_full(u);
}

void FsdpRuntime::finish_gather(int u, bool decode) {
  Unit& unit = units_[size_t(u)];
  if (unit.gathering) {
    timed_wait(*unit.gathering);
    unit.gathering.reset();
  }
  if (!unit.encoded.defined()) return;
  if (decode) {
    const UnitLayout& layout = layouts_[size_t(u)];
    const Quantization q = options_.gather_quantization;
    const int64_t piece = int64_t(quantized_bytes(q, layout.shard_numel));
    const size_t esize = dtype_size(unit.full.dtype());
    for (int r = 0; r < group_.size(); ++r)
      dequantize_blocks(
          q, unit.encoded.data<uint8_t>() + r * piece, layout.shard_numel,
          static_cast<char*>(unit.full.raw()) + size_t(r * layout.shard_numel) * esize,
          unit.full.dtype());
  }
  release(unit.encoded);
}

void FsdpRuntime::release(Tensor& buffer) {
  if (!buffer.defined()) return;
  pool_.release(std::move(buffer));
  buffer = Tensor();
}

void FsdpRuntime::wait_and_bind(int u, bool with_grad) {
  Unit& unit = units_[size_t(u)];
  finish_gather(u, true);
  const auto& specs = model_.param_specs();
  const UnitLayout& layout = layouts_[size_t(u)];
  for (size_t k = 0; k < layout.params.size(); ++k) {
    const ParamSpec& spec = specs[layout.params[k]];
    const int64_t off = layout.flat_offsets[k], n = spec.numel();
    Tensor value = unit.full.slice(off, off + n).view(spec.shape).renamed(spec.name);
    Tensor grad;
    if (with_grad)
      grad = unit.full_grad.slice(off, off + n).view(spec.shape).renamed(spec.name + ".grad");
    model_.bind(layout.params[k], std::move(value), std::move(grad));
  }
}

void FsdpRuntime::release_full(int u) {
  Unit& unit = units_[size_t(u)];
  if (!unit.full.defined()) return;
  finish_gather(u, false);  // prefetched but never used: it must land before the memory is reused
  for (size_t p : layouts_[size_t(u)].params) model_.unbind(p);
  pool_.release(std::move(unit.full));
  unit.full = Tensor();
}

void FsdpRuntime::check_order(const std::vector<int>& order, size_t& next, int u,
                              const char* phase) {
  if (UnitTopology::is_root(u)) next = 0;  // the root opens every pass
  if (next >= order.size() || order[next] != u)
    fail(
        "model '{}' entered unit {} for {} out of order (expected {}): units must follow the "
        "root-and-chain topology of parallel/fsdp/unit_topology.hpp",
        model_.describe(), u, phase,
        next < order.size() ? std::to_string(order[next]) : std::string("no further unit"));
  ++next;
}

// Each hook does what the schedule says (parallel/fsdp/schedule.hpp), which the simulator
// replays too.
void FsdpRuntime::run_schedule(Hook hook, int u) {
  struct Executor final : ScheduleExecutor {
    FsdpRuntime& rt;
    explicit Executor(FsdpRuntime& r) : rt(r) {}
    // A kept slice is gathered back within its reshard group (issue_gather sees it).
    void gather(int unit) override { rt.issue_gather(unit); }
    void regather(int unit) override { rt.issue_gather(unit); }
    void wait(int unit, bool backward) override {
      if (backward) rt.allocate_full_grad(unit);
      rt.wait_and_bind(unit, backward);
    }
    void release(int unit) override { rt.release_full(unit); }
    void keep_slice(int unit) override { rt.keep_slice(unit); }
    void progress() override { rt.drain_reductions(false); }
    void reduce(int unit) override { rt.issue_reduce(unit); }
  } executor(*this);
  schedule_.run(hook, u, micro_, executor);
}

void FsdpRuntime::before_forward(int u) {
  check_order(topology_.forward, next_forward_, u, "forward");
  run_schedule(Hook::before_forward, u);
}

void FsdpRuntime::after_forward(int u) {
  run_schedule(Hook::after_forward, u);
}

void FsdpRuntime::before_backward(int u) {
  check_order(topology_.backward, next_backward_, u, "backward");
  run_schedule(Hook::before_backward, u);
}

void FsdpRuntime::allocate_full_grad(int u) {
  Unit& unit = units_[size_t(u)];
  if (unit.full_grad.defined()) return;
  const UnitLayout& layout = layouts_[size_t(u)];
  // In place: the shard is the whole unit, and no reduce-scatter copies every gradient
  // (77 MB a step on `small`, 1% of its step on one rank).
  unit.full_grad = grads_in_place() ? unit.grad
                                    : pool_.acquire_shared(layout.name + ".unsharded_grad",
                                                           layout.padded_numel, DType::f32);
  unit.full_grad.zero_();
}

bool FsdpRuntime::grads_in_place() const {
  return gradients_in_place(group_.size(), quantized_.reduce_per_node > 0, options_.accumulation,
                            micro_batches_);
}

bool gradients_in_place(int shard_ranks, bool quantized_reduce, Accumulation accumulation,
                        int micro_batches) {
  return shard_ranks == 1 && !quantized_reduce &&
         (accumulation == Accumulation::reduce_last || micro_batches == 1);
}

void FsdpRuntime::after_backward(int u) {
  run_schedule(Hook::after_backward, u);
}

void FsdpRuntime::issue_reduce(int u) {
  Unit& unit = units_[size_t(u)];
  if (grads_in_place()) {
    unit.full_grad = Tensor();  // the shard itself: nothing to reduce-scatter
    if (!replicas_) return;
    // DDP: once a step (in place means one reduction a step), the shard is summed over the
    // replicas where it lies, as soon as its backward is done.
    Reduction r;
    r.unit = u;
    r.target = unit.grad;
    r.work = start_replica_sync(r);
    reductions_.push_back(std::move(r));
    return;
  }
  const UnitLayout& layout = layouts_[size_t(u)];
  Reduction r;
  r.unit = u;
  r.full_grad = std::move(unit.full_grad);
  unit.full_grad = Tensor();
  const bool last_micro = micro_ == micro_batches_ - 1;
  const bool sync_replicas =
      replicas_ && (options_.replica_sync == ReplicaSync::each || last_micro);
  // The first reduction of a step writes the gradient shard; later ones (reduce_each with
  // several micro-batches) land in a partial buffer that is added when it completes.
  r.target = unit.grad;
  if (options_.accumulation == Accumulation::reduce_each && micro_ > 0) {
    // Summed over the replicas itself (replica_sync each): where their all-reduce reads it.
    // Beyond the room reserved for them (earlier ones not yet drained), ordinary memory
    // summed by MPI: waiting here for earlier reductions could wait on a peer that is itself
    // waiting for this rank's next collective.
    int& alive = partials_alive_[layout.shard_numel];
    r.partial_shared = sync_replicas && options_.replica_sync == ReplicaSync::each &&
                       replica_grads_shared_ && alive < partial_room_[layout.shard_numel];
    if (r.partial_shared) alive += 1;
    const std::string name = layout.name + ".partial_grad";
    r.partial = r.partial_shared
                    ? replica_pool_.acquire_shared(name, layout.shard_numel, DType::f32)
                    : pool_.acquire(name, layout.shard_numel, DType::f32);
    r.target = r.partial;
  }
  r.work = start_reduce_scatter(r);
  if (sync_replicas)
    r.stages.push_back([this](Reduction& x) {
      // each: this micro-batch's contribution is summed over replicas, then added to the shard.
      // last: the shard holds every micro-batch's contribution; sum it over replicas once.
      if (options_.replica_sync == ReplicaSync::last) add_partial(x);
      x.target = x.partial.defined() ? x.partial : units_[size_t(x.unit)].grad;
      return start_replica_sync(x);
    });
  reductions_.push_back(std::move(r));
}

std::shared_ptr<Work> FsdpRuntime::start_reduce_scatter(Reduction& r) {
  const UnitLayout& layout = layouts_[size_t(r.unit)];
  const int L = quantized_.reduce_per_node;
  if (L == 0) {
    // Sum: gradients already carry 1 / (global tokens).
    comm_.scattered_bytes += int64_t(r.full_grad.nbytes());
    comm_.scatters += 1;
    r.stages.push_front([this](Reduction& x) {
      release(x.full_grad);
      return std::shared_ptr<Work>();
    });
    return group_.reduce_scatter(r.full_grad, r.target, {ReduceOp::sum, options_.timeout_s});
  }
  // qgZ: K nodes of L ranks; rank k·L + l owns segment k·L + l. First, in FP32 within the
  // node, rank l sums the segments of its column (l, L + l, ..., (K-1)·L + l): node k's L
  // segments are contiguous, so K reduce-scatters over the node, one per node's segments.
  const int K = group_.size() / L;
  const int64_t seg = layout.shard_numel;
  const Quantization q = options_.reduce_quantization;
  const int64_t piece = int64_t(quantized_bytes(q, seg));
  std::deque<Stage> stages;
  // Then each node's partial sum of a segment is encoded once and sent to the segment's owner,
  // which decodes the K pieces and sums them in FP32, in node order.
  stages.push_back([this, K, seg, q, piece](Reduction& x) {
    const Tensor& sums = x.sum.defined() ? x.sum : x.full_grad;  // [K * seg], node sums
    x.send = pool_.acquire(layouts_[size_t(x.unit)].name + ".grad_encoded", K * piece, DType::u8);
    for (int k = 0; k < K; ++k)
      quantize_blocks(q, sums.data<float>() + k * seg, seg, x.send.data<uint8_t>() + k * piece);
    release(x.sum);
    release(x.full_grad);
    x.recv = pool_.acquire(layouts_[size_t(x.unit)].name + ".grad_received", K * piece, DType::u8);
    comm_.scattered_bytes += int64_t(x.send.nbytes());
    return column_group_->all_to_all(x.send, x.recv, {options_.timeout_s});
  });
  stages.push_back([this, K, seg, q, piece](Reduction& x) {
    release(x.send);
    float* out = x.target.data<float>();
    std::fill(out, out + seg, 0.0f);
    for (int k = 0; k < K; ++k) dequantize_add(q, x.recv.data<uint8_t>() + k * piece, seg, out);
    release(x.recv);
    return std::shared_ptr<Work>();
  });
  r.stages.insert(r.stages.begin(), stages.begin(), stages.end());
  comm_.scatters += 1;
  if (L == 1) return nullptr;  // one rank per node: nothing to sum within it
  r.sum = pool_.acquire(layout.name + ".node_sum", K * seg, DType::f32);
  comm_.scattered_bytes += int64_t(r.full_grad.nbytes());
  for (int k = 0; k + 1 < K; ++k)
    r.earlier.push_back(node_group_->reduce_scatter(
        r.full_grad.slice(k * L * seg, (k + 1) * L * seg), r.sum.slice(k * seg, (k + 1) * seg),
        {ReduceOp::sum, options_.timeout_s}));
  return node_group_->reduce_scatter(r.full_grad.slice((K - 1) * L * seg, K * L * seg),
                                     r.sum.slice((K - 1) * seg, K * seg),
                                     {ReduceOp::sum, options_.timeout_s});
}

std::shared_ptr<Work> FsdpRuntime::start_replica_sync(Reduction& r) {
  if (!quantized_.replicas) {
    comm_.replicated_bytes += int64_t(r.target.nbytes());
    comm_.replications += 1;
    return replicas_->all_reduce(r.target, {ReduceOp::sum, options_.timeout_s});
  }
  // An all-reduce as a quantized reduce-scatter (all-to-all, FP32 sums) and a quantized
  // all-gather of the sums; every replica (the chunk's owner too) keeps the decoded values, so
  // all hold the same gradient.
  const int R = replicas_->size(), me = replicas_->rank();
  const int64_t n = r.target.numel(), chunk = (n + R - 1) / R;
  const auto count = [n, chunk](int j) { return std::clamp<int64_t>(n - j * chunk, 0, chunk); };
  const Quantization q = options_.reduce_quantization;
  const int64_t piece = int64_t(quantized_bytes(q, chunk));
  const std::string& name = layouts_[size_t(r.unit)].name;
  r.send = pool_.acquire(name + ".grad_encoded", R * piece, DType::u8);
  r.recv = pool_.acquire(name + ".grad_received", R * piece, DType::u8);
  for (int j = 0; j < R; ++j)
    quantize_blocks(q, r.target.data<float>() + j * chunk, count(j),
                    r.send.data<uint8_t>() + j * piece);
  r.stages.push_front([this, R, me, chunk, count, q, piece](Reduction& x) {
    x.sum = pool_.acquire(layouts_[size_t(x.unit)].name + ".grad_sum", chunk, DType::f32);
    float* sum = x.sum.data<float>();
    std::fill(sum, sum + chunk, 0.0f);
    for (int j = 0; j < R; ++j)
      dequantize_add(q, x.recv.data<uint8_t>() + j * piece, count(me), sum);
    // The sums, encoded into this replica's slot of the gather (the send buffer, reused).
    Tensor slot = x.send.slice(me * piece, (me + 1) * piece);
    quantize_blocks(q, sum, count(me), slot.data<uint8_t>());
    release(x.sum);
    release(x.recv);
    comm_.replicated_bytes += int64_t(x.send.nbytes());
    return replicas_->all_gather(slot, x.send, {options_.timeout_s});
  });
  r.stages.insert(r.stages.begin() + 1, [this, R, chunk, count, q, piece](Reduction& x) {
    for (int j = 0; j < R; ++j)
      dequantize_blocks(q, x.send.data<uint8_t>() + j * piece, count(j),
                        x.target.data<float>() + j * chunk, DType::f32);
    release(x.send);
    return std::shared_ptr<Work>();
  });
  comm_.replicated_bytes += int64_t(r.send.nbytes());
  comm_.replications += 1;
  return replicas_->all_to_all(r.send, r.recv, {options_.timeout_s});
}

void FsdpRuntime::add_partial(Reduction& r) {
  if (!r.partial.defined()) return;
  float* g = units_[size_t(r.unit)].grad.data<float>();
  const float* p = r.partial.data<float>();
  const int64_t n = r.partial.numel();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) g[i] += p[i];
  if (r.partial_shared) partials_alive_[r.partial.numel()] -= 1;
  (r.partial_shared ? replica_pool_ : pool_).release(std::move(r.partial));
  r.partial = Tensor();
}

void FsdpRuntime::drain_reductions(bool block) {
  while (!reductions_.empty()) {
    Reduction& r = reductions_.front();
    if (r.work) {
      if (!block && !r.work->is_completed()) return;  // in order: stop at the first unfinished
      for (auto& w : r.earlier) timed_wait(*w);
      r.earlier.clear();
      timed_wait(*r.work);
      r.work.reset();
    }
    if (!r.stages.empty()) {
      Stage next = std::move(r.stages.front());
      r.stages.pop_front();
      r.work = next(r);
      continue;
    }
    add_partial(r);
    reductions_.pop_front();
  }
}

void FsdpRuntime::finish_backward() {
  drain_reductions(true);
  // With reduce_last every unit reduced on the last micro-batch; any unsharded gradient still
  // held here would mean a micro-batch was never announced as the last.
  for (size_t u = 0; u < units_.size(); ++u)
    ST_CHECK(!units_[u].full_grad.defined(),
             "unit '{}' still holds an unsharded gradient at the end of the step (micro-batch "
             "{} of {})",
             layouts_[u].name, micro_, micro_batches_);
}

void FsdpRuntime::reshard_all() {
  for (int u = 0; u < int(units_.size()); ++u) release_full(u);
  drop_kept_slices();
}

void FsdpRuntime::hold_for_step(bool with_grad) {
  // Every all-gather issued first, then each waited for in turn: they queue on the
  // communication thread while the earlier ones land.
  for (int u = 0; u < int(units_.size()); ++u)
    if (holds(u)) issue_gather(u);
  for (int u = 0; u < int(units_.size()); ++u) {
    if (!holds(u)) continue;
    if (with_grad) allocate_full_grad(u);
    wait_and_bind(u, with_grad);
  }
}

void FsdpRuntime::reduce_held_units() {
  micro_ = micro_batches_ - 1;  // the step's one reduction: replicas sync with it
  for (int u = int(units_.size()) - 1; u >= 0; --u)
    if (units_[size_t(u)].full_grad.defined()) issue_reduce(u);
}

std::vector<ShardSpan> FsdpRuntime::spans() const {
  std::vector<ShardSpan> out;
  const auto& specs = model_.param_specs();
  for (size_t u = 0; u < units_.size(); ++u) {
    if (!holds(int(u))) continue;
    for (const ShardSegment& s : layouts_[u].segments(specs, group_.rank())) {
      const ParamSpec& spec = specs[s.param];
      const int64_t a = s.shard_offset, b = a + s.numel;
      out.push_back({spec.name, units_[u].master.slice(a, b), units_[u].grad.slice(a, b),
                     spec.weight_decay, int(u), a, s.param, s.param_offset});
    }
  }
  return out;
}

Tensor FsdpRuntime::gather_master(size_t index) {
  const auto& specs = model_.param_specs();
  ST_CHECK(index < specs.size(), "parameter index {} out of range", index);
  const ParamSpec& spec = specs[index];
  const UnitLayout& layout = layouts_[size_t(spec.unit)];
  if (!holds(spec.unit))
    fail("parameter '{}' lives on another pipeline stage than this rank's", spec.name);
  Tensor full = Tensor::empty(layout.name + ".master_gathered", {layout.padded_numel}, DType::f32);
  group_.all_gather(units_[size_t(spec.unit)].master, full, gather_options())->wait();
  const size_t k =
      size_t(std::find(layout.params.begin(), layout.params.end(), index) - layout.params.begin());
  const int64_t off = layout.flat_offsets[k];
  Tensor out = Tensor::empty(spec.name, spec.shape, DType::f32);
  std::memcpy(out.raw(), full.data<float>() + off, out.nbytes());
  return out;
}

FsdpMemory FsdpRuntime::memory() const {
  FsdpMemory m;
  for (const Unit& u : units_) m.shard_bytes += int64_t(u.master.nbytes() + u.grad.nbytes());
  // The two pools' peaks need not coincide: their sum bounds the step's.
  m.unsharded_peak_bytes = pool_.peak_in_use_bytes() + replica_pool_.peak_in_use_bytes();
  return m;
}

}  // namespace st
