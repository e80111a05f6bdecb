// The simulator (simulate/): the α-β fit, the engine against closed forms and a hand-drawn
// timeline, the replayed schedule against the runtime itself, contention, the compute model's
// scaling, and the strictness of profiles and cluster files.
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cctype>
#include <thread>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include <cmath>
#include <string>
#include <vector>

#include "collectives/fake_process_group.hpp"
#include "launch/cluster_config.hpp"
#include "launch/simulate_command.hpp"
#include "models/gpt2/gpt.hpp"
#include "models/llama/llama.hpp"
#include "parallel/fsdp/fsdp_runtime.hpp"
#include "simulate/alpha_beta.hpp"
#include "simulate/compute_model.hpp"
#include "simulate/engine.hpp"
#include "simulate/profile.hpp"
#include "simulate/replay.hpp"
#include "simulate/symmetry.hpp"
#include "tests/temp_dir.hpp"

namespace st {
namespace {

TEST(Simulate, AlphaBetaFitRecoversKnownValues) {
  const AlphaBeta truth{7.5e-6, 0.42e-9};
  std::vector<TimingSample> exact, noisy;
  int k = 0;
  for (int p : {2, 3, 4})
    for (double n = 4096; n <= 64 << 20; n *= 4) {
      const double steps = p - 1, bytes = n * (p - 1) / p;
      const double t = steps * truth.alpha + bytes * truth.beta;
      exact.push_back({steps, bytes, t});
      noisy.push_back({steps, bytes, t * (1 + 0.03 * ((k++ % 3) - 1))});  // ±3%
    }
  const AlphaBeta fit = fit_alpha_beta(exact);
  EXPECT_NEAR(fit.alpha, truth.alpha, 1e-9 * truth.alpha + 1e-15);
  EXPECT_NEAR(fit.beta, truth.beta, 1e-9 * truth.beta);
  const AlphaBeta rough = fit_alpha_beta(noisy);
  EXPECT_NEAR(rough.alpha, truth.alpha, 0.05 * truth.alpha);
  EXPECT_NEAR(rough.beta, truth.beta, 0.05 * truth.beta);
  // One message size cannot separate α from β.
  EXPECT_THROW(fit_alpha_beta({{1, 100, 1e-3}, {1, 100, 1.1e-3}}), InputError);
}

// A platform whose rings never share a link: every rank its own node, or ranks of one node
// (each with its own link), no shared-memory window, a non-blocking fabric.
SimPlatform free_platform(int nodes, int ranks_per_node, AlphaBeta link) {
  SimPlatform p;
  p.nodes = nodes;
  p.ranks_per_node = ranks_per_node;
  p.links.intra_gather = p.links.intra_reduce = link;
  p.links.inter_gather = p.links.inter_reduce = link;
  return p;
}

// One unit (the root), no compute: a step is its all-gather, its reduce-scatter and the
// norm's all-reduce (16 bytes, recursive doubling).
StepPlan one_unit(int64_t padded, int world_shard) {
  StepPlan plan;
  plan.units = {{padded, padded / world_shard}};
  plan.compute.block_forward = plan.compute.block_backward = {};
  return plan;
}

double doubling_rounds(int p) {
  return std::ceil(std::log2(double(p)));
}

TEST(Simulate, ContentionFreeRingsEqualTheClosedForms) {
  const AlphaBeta link{20e-6, 1e-9};            // 20 µs, 1 GB/s
  const int64_t padded = 3 * 4 * 5 * 7 * 1024;  // divisible by 3, 4 and 8's... shards below
  for (const auto& [nodes, per_node, max_steps] : std::vector<std::tuple<int, int, int>>{
           {1, 3, 0}, {4, 1, 0}, {1, 4, 0}, {8, 1, 2}, {3, 1, 2}}) {
    const int p = nodes * per_node;
    SimOptions options;
    options.max_ring_steps = max_steps;
    const SimResult r = simulate_step(free_platform(nodes, per_node, link), {p, 1},
                                      one_unit(padded * 8, p), options);
    const double n_gather = double(padded * 8) * 2, n_reduce = double(padded * 8) * 4;
    const double want = ring_gather_seconds(link, n_gather, p) +
                        ring_gather_seconds(link, n_reduce, p) +
                        doubling_rounds(p) * (link.alpha + 16 * link.beta);
    EXPECT_NEAR(r.step, want, 1e-9 * want)
        << p << " ranks on " << nodes << " nodes, ring steps " << max_steps;
    EXPECT_NEAR(r.exposed, want - doubling_rounds(p) * (link.alpha + 16 * link.beta), 1e-9 * want);
  }
  // DDP: the gradient (one shard of the whole unit) all-reduced across 4 replicas as a ring,
  // then the loss across the world (8 bytes); the shard group of one moves nothing.
  const SimResult ddp = simulate_step(free_platform(4, 1, link), {1, 4}, [&] {
    StepPlan plan = one_unit(padded, 1);
    plan.replicated = true;
    return plan;
  }());
  const double want =
      ring_all_reduce_seconds(link, double(padded) * 4, 4) + 2 * (link.alpha + 8 * link.beta);
  EXPECT_NEAR(ddp.step, want, 1e-9 * want);
  // With MPI's all-reduce measured (slower than a plain ring of the link): every step of its
  // ring takes the measured per-step cost, the simulated steps and the extrapolated ones alike
  // (once the measured excess was added once per ring, not per step).
  const AlphaBeta mpi{60e-6, 1.5e-9};
  for (const auto& [replicas, max_steps] : std::vector<std::pair<int, int>>{{4, 0}, {8, 2}}) {
    SimPlatform p = free_platform(replicas, 1, link);
    p.links.inter_all_reduce = mpi;
    SimOptions options;
    options.max_ring_steps = max_steps;
    const SimResult measured = simulate_step(
        p, {1, replicas},
        [&] {
          StepPlan plan = one_unit(padded, 1);
          plan.replicated = true;
          return plan;
        }(),
        options);
    const double want_mpi = ring_all_reduce_seconds(mpi, double(padded) * 4, replicas) +
                            doubling_rounds(replicas) * (link.alpha + 8 * link.beta);
    EXPECT_NEAR(measured.step, want_mpi, 1e-9 * want_mpi) << replicas << " replicas";
  }
}

// A root and one block's compute, in ms: the root's parts forward before and after the block,
// backward before and after it, then the block's forward and backward.
SegmentTimes one_block_ms(double fwd_pre, double fwd_post, double bwd_pre, double bwd_post,
                          double block_fwd, double block_bwd) {
  const double ms = 1e-3;
  SegmentTimes t;
  t.root_forward_pre = fwd_pre * ms, t.root_forward_post = fwd_post * ms;
  t.root_backward_pre = bwd_pre * ms, t.root_backward_post = bwd_post * ms;
  t.block_forward = {block_fwd * ms};
  t.block_backward = {block_bwd * ms};
  return t;
}

// Two units (root, one block), 2 ranks on 2 nodes, a 1 ms / 1 GB/s link: the timeline drawn
// by hand from the runtime's rules (prefetch 1, reshard after forward, reduce_each).
TEST(Simulate, TwoUnitTimelineMatchesTheHandDrawnOne) {
  const double ms = 1e-3;
  StepPlan plan;
  plan.units = {{1 << 20, 1 << 19}, {1 << 20, 1 << 19}};  // 2 MiB gathered, 4 MiB reduced each
  plan.compute = one_block_ms(1, 2, 3, 1, 4, 8);
  plan.optimizer = 0.5 * ms;
  SimOptions options;
  options.timeline_ranks = 1;
  const SimResult r = simulate_step(free_platform(2, 1, {1 * ms, 1e-9}), {2, 1}, plan, options);
  // all-gather: one step of half of 2 MiB; reduce-scatter: one step of half of 4 MiB.
  const double ag = 1 * ms + 1048576e-9, rs = 1 * ms + 2097152e-9, norm = 1 * ms + 16e-9;
  // t=0 both gathers queued (prefetch 1); wait for AG0; embed; wait for AG1; block; head...
  const double fwd_block_start = 2 * ag;
  const double bwd_block_end = fwd_block_start + 4 * ms + 2 * ms + 3 * ms + 8 * ms;
  const double rs1_end = bwd_block_end + rs, rs0_end = rs1_end + rs;  // one at a time
  const double want_step = rs0_end + norm + 0.5 * ms;
  EXPECT_NEAR(r.step, want_step, 1e-12);
  EXPECT_NEAR(r.compute, 19.5 * ms, 1e-12);
  EXPECT_NEAR(r.exposed, ag + (2 * ag - (ag + 1 * ms)) + (rs0_end - (bwd_block_end + 1 * ms)),
              1e-12);
  EXPECT_EQ(r.longest_wait, "reduce-scatter unit 0");
  // Spans of rank 0, as drawn: [name, begin, end].
  const std::vector<std::tuple<bool, std::string, double, double>> drawn = {
      {true, "all-gather unit 0", 0, ag},
      {true, "all-gather unit 1", ag, 2 * ag},
      {false, "forward unit 0", ag, ag + 1 * ms},
      {false, "forward unit 1", 2 * ag, 2 * ag + 4 * ms},
      {false, "backward unit 1", 2 * ag + 9 * ms, bwd_block_end},
      {true, "reduce-scatter unit 1", bwd_block_end, rs1_end},
      {false, "backward unit 0", bwd_block_end, bwd_block_end + 1 * ms},
      {true, "reduce-scatter unit 0", rs1_end, rs0_end},
      {false, "optimizer", rs0_end + norm, want_step}};
  for (const auto& [comm, name, begin, end] : drawn) {
    bool found = false;
    for (const SimSpan& s : r.timeline)
      if (s.rank == 0 && s.comm == comm && s.name == name && std::abs(s.begin - begin) < 1e-12 &&
          std::abs(s.end - end) < 1e-12)
        found = true;
    EXPECT_TRUE(found) << name << " [" << begin << ", " << end << "] is not in the timeline";
  }
}

// A backend that only records which collectives a rank issues on which group.
class RecordingBackend final : public ReplayBackend {
 public:
  std::vector<CollectiveCall> calls;
  int issue(const CollectiveCall& call) override {
    calls.push_back(call);
    return int(calls.size()) - 1;
  }
  bool is_completed(int) override { return true; }
  void wait(int) override {}
  void compute(double, const char*, int) override {}
  double now() override { return 0; }
};

// hpZ in the replay, as FsdpRuntime does it: the forward gathers every unit from the shard
// group; the backward gathers the blocks it kept slices of (all but the root, which stays
// gathered, and the last of the forward, which the backward starts with) from the reshard group.
TEST(Simulate, ReshardToGathersTheBackwardFromTheReshardGroup) {
  StepPlan plan;
  plan.units = {{64, 16}, {64, 16}, {64, 16}, {64, 16}};  // root + 3 blocks, 4 shard ranks
  plan.compute.block_forward = plan.compute.block_backward = {0, 0, 0};
  for (const int reshard_to : {0, 2}) {
    plan.reshard_to = reshard_to;
    RecordingBackend backend;
    RankReplay(plan, backend).run_step();
    std::vector<std::pair<int, GroupKind>> gathers;
    for (const CollectiveCall& c : backend.calls)
      if (c.kind == CollectiveKind::all_gather) gathers.emplace_back(c.unit, c.group);
    const GroupKind back = reshard_to ? GroupKind::reshard : GroupKind::shard;
    const std::vector<std::pair<int, GroupKind>> want = {{0, GroupKind::shard},
                                                         {1, GroupKind::shard},
                                                         {2, GroupKind::shard},
                                                         {3, GroupKind::shard},
                                                         {2, back},
                                                         {1, back}};
    EXPECT_EQ(gathers, want) << "reshard_to " << reshard_to;
  }
}

// 2 nodes x 2 ranks behind a slow inter-node link and a free intra-node one: with hpZ the
// backward's all-gathers stay inside the nodes, so the step is shorter by more than one
// cross-node all-gather (two blocks are kept; the forward's gathers still cross).
TEST(Simulate, ReshardToKeepsTheBackwardGathersInsideTheNodes) {
  SimPlatform p = free_platform(2, 2, {0, 0});
  p.links.inter_gather = p.links.inter_reduce = {1e-3, 1e-9};  // 1 ms, 1 GB/s
  StepPlan plan;
  const int64_t padded = int64_t(1) << 22;  // 8 MiB in BF16 per unit
  plan.units = {
      {padded, padded / 4}, {padded, padded / 4}, {padded, padded / 4}, {padded, padded / 4}};
  plan.compute.block_forward = plan.compute.block_backward = {1e-3, 1e-3, 1e-3};
  const SimResult fsdp = simulate_step(p, {4, 1}, plan);
  plan.reshard_to = 2;
  const SimResult hpz = simulate_step(p, {4, 1}, plan);
  // One ring all-gather of a unit over 4 ranks on 2 nodes: 3 steps of a quarter each, crossing.
  const double gather = 3 * (1e-3 + double(padded) * 2 / 4 * 1e-9);
  EXPECT_LT(hpz.step, fsdp.step - gather) << "fsdp " << fsdp.step << " s, hpz " << hpz.step;
}

TEST(Simulate, AMachinesCoresAreShared) {
  // 4 ranks of 1 thread computing 10 ms at once: on 4 cores 10 ms, on 2 cores 20 ms.
  StepPlan plan = one_unit(4096, 4);
  plan.compute.root_forward_pre = 10e-3;
  SimPlatform p = free_platform(1, 4, {0, 0});
  p.machine_cores = 4;
  EXPECT_NEAR(simulate_step(p, {1, 4}, plan).compute, 10e-3, 1e-12);
  p.machine_cores = 2;
  EXPECT_NEAR(simulate_step(p, {1, 4}, plan).compute, 20e-3, 1e-12);
  // Two emulated hosts of 2 ranks on one 2-core machine: the same.
  SimPlatform hosts = free_platform(2, 2, {0, 0});
  hosts.nodes_per_machine = 2;
  hosts.machine_cores = 2;
  EXPECT_NEAR(simulate_step(hosts, {1, 4}, plan).compute, 20e-3, 1e-12);
}

// MPI polls on the communication thread while a collective between nodes is in flight: with
// no core to spare, a rank's compute shares its core with that thread for as long as the
// prefetched all-gathers and the reduce-scatters last; with a core to spare it runs at full
// speed. 2 nodes of 1 rank, FSDP across them, each node its own machine.
TEST(Simulate, ACollectiveBetweenNodesPollsOnSharedCores) {
  SimPlatform p = free_platform(2, 1, {0, 0});
  p.links.inter_gather = p.links.inter_reduce = {1e-3, 1e-9};  // 1 ms, 1 GB/s
  StepPlan plan;
  const int64_t padded = int64_t(1) << 22;  // 8 MiB in BF16: ~5 ms a ring step
  plan.units = {{padded, padded / 2}, {padded, padded / 2}, {padded, padded / 2}};
  plan.compute.block_forward = plan.compute.block_backward = {10e-3, 10e-3};
  p.machine_cores = 2;  // the compute thread and the polling one have a core each
  const SimResult spare = simulate_step(p, {2, 1}, plan);
  p.machine_cores = 1;
  const SimResult shared = simulate_step(p, {2, 1}, plan);
  EXPECT_NEAR(spare.compute, 40e-3, 1e-9);
  EXPECT_GT(shared.compute, spare.compute * 1.1) << "shared " << shared.compute;
  EXPECT_GT(shared.step, spare.step);
}

TEST(Simulate, AnOversubscribedCoreSlowsCrossNodeRings) {
  const AlphaBeta link{1e-6, 1e-9};
  SimPlatform free = free_platform(4, 1, link), tree = free;
  tree.links.fabric = FabricKind::fat_tree;
  tree.links.oversubscription = 4;  // the core carries one node link's worth for all four
  const StepPlan plan = one_unit(1 << 24, 4);
  const double a = simulate_step(free, {4, 1}, plan).step,
               b = simulate_step(tree, {4, 1}, plan).step;
  EXPECT_GT(b, 3.5 * a);  // four flows share what one had: the bandwidth term takes 4x
  EXPECT_LT(b, 4.1 * a);
}

// Nodes that behave alike are simulated once (simulate/symmetry.hpp): on sizes both can run,
// the folded simulation gives the step and exposed time of the one that simulates every node,
// for every mesh the folding accepts, on an oversubscribed fat tree with slower links between
// nodes than inside them (messages above and below 64 KiB: rings and recursive doubling).
TEST(Simulate, NodesThatBehaveAlikeAreSimulatedOnce) {
  StepPlan plan;
  plan.units = {{1 << 18, 0}, {3 << 18, 0}, {1 << 12, 0}};
  plan.compute.root_forward_pre = plan.compute.root_backward_post = 2e-3;
  plan.compute.block_forward = {3e-3, 1e-4};
  plan.compute.block_backward = {6e-3, 2e-4};
  plan.optimizer = 1e-3;
#ifdef SHARDTRAIN_SANITIZED  // actors are threads there: the smaller platforms, the same checks
  const std::vector<std::pair<int, int>> platforms = {{8, 2}};
#else
  const std::vector<std::pair<int, int>> platforms = {{16, 4}, {12, 2}};
#endif
  for (const auto& [nodes, per_node] : platforms) {
    SimPlatform p = free_platform(nodes, per_node, {1e-6, 0.1e-9});
    p.links.inter_gather = p.links.inter_reduce = {5e-6, 0.5e-9};
    p.links.fabric = FabricKind::fat_tree;
    p.links.oversubscription = 2;
    const int W = nodes * per_node;
    for (const int shard : {W, per_node, 1, 2 * per_node, W / 4, 2}) {
      const MeshShape mesh{.dp_shard = shard, .dp_replicate = W / shard};
      StepPlan q = plan;
      for (UnitPlan& u : q.units) u.shard_numel = u.padded_numel / shard;
      q.replicated = mesh.dp_replicate > 1;
      SimOptions all;
      all.every_node = true;
      const SimResult folded = simulate_step(p, mesh, q), every = simulate_step(p, mesh, q, all);
      const std::string what =
          fmt::format("{}x{} on {} nodes of {}", shard, W / shard, nodes, per_node);
      EXPECT_EQ(every.simulated_ranks, W) << what;
      EXPECT_NEAR(folded.step, every.step, 1e-3 * every.step) << what;
      EXPECT_NEAR(folded.exposed, every.exposed, 1e-3 * every.step) << what;
      EXPECT_NEAR(folded.inter_bytes, every.inter_bytes, 1e-9 * every.inter_bytes) << what;
      // FSDP, HSDP and DDP fold where the world is a power of two; 24 (12) ranks' recursive
      // doubling skips partners, so its nodes differ and all are simulated.
      if (shard == W || shard == per_node || shard == 1) {
        const bool power_of_two = (W & (W - 1)) == 0;
        EXPECT_EQ(folded.simulated_ranks, power_of_two ? 4 * per_node : W) << what;
      }
    }
  }
  // With tensor parallelism (TP groups of 2 inside each node, shard groups 2 apart, TP
  // collectives in every block): 4 of the 8 nodes simulated, as every node.
  for (const auto& [shard, replicate] : std::vector<std::pair<int, int>>{{16, 1}, {2, 8}}) {
    SimPlatform p = free_platform(8, 4, {1e-6, 0.1e-9});
    p.links.inter_gather = p.links.inter_reduce = {5e-6, 0.5e-9};
    const MeshShape mesh{.dp_shard = shard, .dp_replicate = replicate, .tp = 2};
    StepPlan q = plan;
    for (UnitPlan& u : q.units) u.shard_numel = u.padded_numel / shard;
    q.replicated = replicate > 1;
    q.tp = 2;
    q.tp_calls.block_forward = {{TpOp::all_gather, 1 << 20}, {TpOp::reduce_scatter, 1 << 21}};
    q.tp_calls.block_backward = {{TpOp::all_gather, 1 << 21}, {TpOp::all_reduce, 256}};
    SimOptions all;
    all.every_node = true;
    const SimResult folded = simulate_step(p, mesh, q), every = simulate_step(p, mesh, q, all);
    const std::string what = fmt::format("{}x{} x tp 2 on 8 nodes of 4", shard, replicate);
    EXPECT_EQ(folded.simulated_ranks, 16) << what;
    EXPECT_NEAR(folded.step, every.step, 1e-3 * every.step) << what;
    EXPECT_NEAR(folded.tp_exposed, every.tp_exposed, 1e-3 * every.step) << what;
    EXPECT_GT(folded.tp_exposed, 0) << what;
    EXPECT_NEAR(folded.inter_bytes, every.inter_bytes, 1e-9 * every.inter_bytes) << what;
  }
  // A shard group of half the world folds onto itself below all nodes: every node is simulated.
  EXPECT_EQ(represented_nodes({16, 4, 32, 2}, 1), 16);
  EXPECT_EQ(represented_nodes({16, 4, 8, 8}, 1), 4);
  EXPECT_EQ(represented_nodes({16, 4, 64, 1}, 2), 4);
  EXPECT_EQ(represented_nodes({16, 4, 64, 1}, 8), 8);  // machines share cores: whole machines
}

// The runtime's groups on a dp_replicate 2 x dp_shard 2 x tp 2 mesh of 8 ranks (rank =
// (replica x 2 + shard) x 2 + tp), by hand: TP groups are consecutive pairs, shard groups
// skip the TP rank, replica groups skip a replica's 4 ranks, and hpZ's reshard groups and
// quantized reductions' node and column groups are runs of the (strided) shard group.
TEST(Simulate, GroupsOfATensorParallelMeshAreTheRuntimes) {
  const RankLayout layout{2, 4, 2, 2, 0, 0, 2};
  auto members = [&](int rank, GroupKind kind) {
    const GroupShape g = layout.group(rank, kind);
    std::vector<int> m;
    for (int j = 0; j < g.size; ++j) m.push_back(g.member(j));
    EXPECT_EQ(g.member(g.index), rank);
    return m;
  };
  EXPECT_EQ(members(5, GroupKind::tp), (std::vector<int>{4, 5}));
  EXPECT_EQ(members(5, GroupKind::shard), (std::vector<int>{5, 7}));
  EXPECT_EQ(members(5, GroupKind::replicas), (std::vector<int>{1, 5}));
  EXPECT_EQ(members(5, GroupKind::world).size(), 8u);
  // Each kind's groups partition the world, with ids unique over every kind.
  std::set<int> ids;
  for (int k = 0; k < kGroupKinds; ++k) {
    std::map<int, std::set<int>> groups;
    for (int r = 0; r < 8; ++r) {
      const GroupShape g = layout.group(r, GroupKind(k));
      for (int j = 0; j < g.size; ++j) groups[g.id].insert(g.member(j));
    }
    int covered = 0;
    for (const auto& [id, m] : groups) covered += int(m.size());
    // Without hpZ or qgZ the reshard, node and column groups are the shard group's.
    if (GroupKind(k) != GroupKind::reshard && GroupKind(k) != GroupKind::node &&
        GroupKind(k) != GroupKind::column) {
      for (const auto& [id, m] : groups) EXPECT_TRUE(ids.insert(id).second) << "group id " << id;
    }
    EXPECT_EQ(covered, 8) << "kind " << k;
  }
  // FSDP 4 x tp 2 with hpZ 2 and quantized reductions of 2 per node: ranks 1, 3, 5, 7 shard
  // together; reshard and node groups are their pairs, columns their places.
  const RankLayout hpz{2, 4, 4, 1, 2, 2, 2};
  const GroupShape shard = hpz.group(5, GroupKind::shard);
  EXPECT_EQ(shard.first, 1);
  EXPECT_EQ(shard.stride, 2);
  const GroupShape reshard = hpz.group(5, GroupKind::reshard), node = hpz.group(7, GroupKind::node),
                   column = hpz.group(7, GroupKind::column);
  EXPECT_EQ(std::tuple(reshard.first, reshard.stride, reshard.size, reshard.index),
            std::tuple(5, 2, 2, 0));
  EXPECT_EQ(std::tuple(node.first, node.stride, node.size, node.index), std::tuple(5, 2, 2, 1));
  EXPECT_EQ(std::tuple(column.first, column.stride, column.size, column.index),
            std::tuple(3, 4, 2, 1));
}

// TP collectives block the compute: on 2 ranks of one node (tp 2, no FSDP traffic: a shard
// group of one), a step is its compute plus each TP collective's ring time, in the order the
// segments issue them, all of it counted as TP's; the norm's all-reduce spans the world.
TEST(Simulate, TensorParallelCollectivesBlockTheCompute) {
  const double ms = 1e-3;
  const AlphaBeta link{0.1 * ms, 1e-9};
  StepPlan plan;
  plan.units = {{1 << 10, 1 << 10}, {1 << 10, 1 << 10}};
  plan.compute = one_block_ms(1, 2, 2, 1, 4, 8);
  plan.tp = 2;
  const double n = 1 << 20;  // bytes: rings of two steps of half
  plan.tp_calls.root_forward_pre = {{TpOp::reduce_scatter, n}};
  plan.tp_calls.block_forward = {{TpOp::all_gather, n / 2}, {TpOp::reduce_scatter, n}};
  plan.tp_calls.root_forward_post = {{TpOp::all_reduce, 64}};
  plan.tp_calls.block_backward = {{TpOp::all_gather, n}, {TpOp::all_reduce, n}};
  plan.tp_shared_grad_bytes = 128;
  SimOptions options;
  options.timeline_ranks = 1;
  const SimResult r =
      simulate_step(free_platform(1, 2, link), {.dp_shard = 1, .tp = 2}, plan, options);
  auto ring = [&](double bytes, int steps) { return steps * (link.alpha + bytes / 2 * link.beta); };
  const double tp = ring(n, 1) + ring(n / 2, 1) + ring(n, 1) + (link.alpha + 64 * link.beta) +
                    ring(n, 1) + ring(n, 2) + (link.alpha + 128 * link.beta);
  const double norm = link.alpha + 16 * link.beta;
  EXPECT_NEAR(r.compute, 18 * ms, 1e-12);
  EXPECT_NEAR(r.tp_exposed, tp, 1e-12);
  EXPECT_NEAR(r.step, 18 * ms + tp + norm, 1e-12);
  EXPECT_NEAR(r.exposed, 0, 1e-12);
  // The block's forward: a third of its compute, the gather, a third, the scatter, a third.
  std::vector<std::pair<std::string, double>> spans;  // rank 0's compute thread, in order
  for (const SimSpan& span : r.timeline)
    if (!span.comm && span.rank == 0) spans.push_back({span.name, span.end - span.begin});
  const auto first = std::find_if(spans.begin(), spans.end(),
                                  [](const auto& x) { return x.first == "forward unit 1"; });
  ASSERT_GE(spans.end() - first, 5);
  const std::vector<std::string> names{"forward unit 1", "wait", "forward unit 1", "wait",
                                       "forward unit 1"};
  const std::vector<double> seconds{4 * ms / 3, ring(n / 2, 1), 4 * ms / 3, ring(n, 1), 4 * ms / 3};
  for (size_t k = 0; k < names.size(); ++k) {
    EXPECT_EQ(first[ptrdiff_t(k)].first, names[k]) << "span " << k;
    EXPECT_NEAR(first[ptrdiff_t(k)].second, seconds[k], 1e-12) << "span " << k;
  }
}

// An engine that dies is one message: what was simulated, how the engine ended, its last
// words, and what to change; never a bare status.
TEST(Simulate, AnEngineThatDiesIsNamedWithWhatToChange) {
  testing::ScopedTempDir dir;
  const std::string engine = dir.path("engine.sh");
  {
    std::ofstream f(engine);
    f << "#!/bin/sh\ncat >/dev/null\necho 'engine: out of stacks' >&2\nkill -ABRT $$\n";
  }
  std::filesystem::permissions(engine, std::filesystem::perms::owner_all);
  SimOptions options;
  options.engine = engine;
  options.every_node = true;
  try {
    simulate_step(free_platform(2, 1, {1e-6, 1e-9}), {2, 1}, one_unit(1 << 16, 2), options);
    ADD_FAILURE() << "a dead engine gave a result";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("the simulation of 2 ranks as 2x1 stopped: the engine '" + engine +
                     "' was killed by signal 6 (Aborted) (its last words: \"engine: out of "
                     "stacks\"). If memory ran out, simulate fewer ranks or drop --all-nodes"),
              std::string::npos)
        << m;
  }
}

// The engine's size is known before it starts (simulate refuses a run over its memory limit
// then): the ranks it simulates, as it reports them, their actors, and an estimate of its
// memory that stays small for the folded 131,072 ranks and is huge for a million nodes that
// do not fold.
TEST(Simulate, EngineFootprintIsKnownBeforeItRuns) {
  const SimPlatform p = free_platform(16, 4, {1e-6, 1e-9});
  const StepPlan plan = one_unit(1 << 16, 64);
  SimOptions every;
  every.every_node = true;
  const EngineFootprint folded = engine_footprint(p, {64, 1}, plan, {});
  EXPECT_EQ(folded.simulated_ranks, 16);  // 4 nodes of 4
  EXPECT_EQ(folded.simulated_ranks, simulate_step(p, {64, 1}, plan).simulated_ranks);
  const EngineFootprint all = engine_footprint(p, {64, 1}, plan, every);
  EXPECT_EQ(all.simulated_ranks, 64);
  EXPECT_EQ(all.actors, 64 * 4.0);  // a compute thread, and shard, replica and world threads
  EXPECT_GT(all.bytes, folded.bytes);
  StepPlan hpz = plan;
  hpz.reshard_to = 2;  // the reshard groups' threads too
  EXPECT_EQ(engine_footprint(p, {64, 1}, hpz, every).actors, 64 * 5.0);
  const double MiB = 1048576, GiB = 1024 * MiB;
  const EngineFootprint frontier =
      engine_footprint(free_platform(16384, 8, {1e-6, 1e-9}), {131072, 1}, plan, {});
  EXPECT_EQ(frontier.simulated_ranks, 32);
  EXPECT_LT(frontier.bytes, 100 * MiB);
  // 8,000,000 ranks in one shard group (not a power of two) is simulated whole.
  const EngineFootprint million =
      engine_footprint(free_platform(1000000, 8, {1e-6, 1e-9}), {8000000, 1}, plan, {});
  EXPECT_EQ(million.simulated_ranks, 8000000);
  EXPECT_GT(million.bytes, 500 * GiB);
}

// A NIC per rank (GPU pods) against one link per node: HSDP's 4 replica rings cross between
// 2 nodes at once; through one node link they share it (4x the bandwidth term), through their
// own NICs they do not.
TEST(Simulate, ANicPerRankCarriesConcurrentRingsAtFullRate) {
  SimPlatform node_link = free_platform(2, 4, {1e-7, 1e-12});
  node_link.links.inter_gather = node_link.links.inter_reduce = {1e-6, 1e-9};
  SimPlatform nic = node_link;
  nic.links.nic_per_rank = true;
  StepPlan plan = one_unit(1 << 24, 4);
  plan.replicated = true;
  const double shared = simulate_step(node_link, {4, 2}, plan).step,
               own = simulate_step(nic, {4, 2}, plan).step;
  EXPECT_GT(shared, 3.5 * own);
  EXPECT_LT(shared, 4.1 * own);
}

// A ProcessGroup that logs what the runtime asks of it, over a real (fake, in-process) group.
// Groups split from it log into the same list, each line prefixed with the group's name
// without its number ("[node] reduce-scatter 4096").
class RecordingGroup final : public ProcessGroup {
 public:
  explicit RecordingGroup(ProcessGroup& inner, std::vector<std::string>* log = nullptr,
                          std::string prefix = "")
      : log(log ? *log : own_log_), inner_(inner), prefix_(std::move(prefix)) {
    nodes_ = inner.nodes();
  }
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  const std::string& name() const override { return inner_.name(); }
  std::shared_ptr<Work> all_gather(const Tensor& in, const Tensor& out,
                                   const AllGatherOptions& o) override {
    log.push_back(prefix_ + fmt::format("all-gather {}", out.nbytes()));
    return inner_.all_gather(in, out, o);
  }
  std::shared_ptr<Work> reduce_scatter(const Tensor& in, const Tensor& out,
                                       const ReduceScatterOptions& o) override {
    log.push_back(prefix_ + fmt::format("reduce-scatter {}", in.nbytes()));
    return inner_.reduce_scatter(in, out, o);
  }
  std::shared_ptr<Work> all_reduce(const Tensor& b, const AllReduceOptions& o) override {
    log.push_back(prefix_ + fmt::format("all-reduce {}", b.nbytes()));
    return inner_.all_reduce(b, o);
  }
  std::shared_ptr<Work> all_to_all(const Tensor& in, const Tensor& out,
                                   const AllToAllOptions& o) override {
    log.push_back(prefix_ + fmt::format("all-to-all {}", in.nbytes()));
    return inner_.all_to_all(in, out, o);
  }
  std::shared_ptr<Work> broadcast(const Tensor& b, int root, const BroadcastOptions& o) override {
    return inner_.broadcast(b, root, o);
  }
  std::shared_ptr<Work> barrier(const BarrierOptions& o) override { return inner_.barrier(o); }
  std::shared_ptr<Work> send(const Tensor& b, int peer, const P2POptions& o) override {
    log.push_back(prefix_ + fmt::format("send {}", b.nbytes()));
    return inner_.send(b, peer, o);
  }
  std::shared_ptr<Work> recv(const Tensor& b, int peer, const P2POptions& o) override {
    log.push_back(prefix_ + fmt::format("recv {}", b.nbytes()));
    return inner_.recv(b, peer, o);
  }
  void abort(const std::string& reason) override { inner_.abort(reason); }
  std::string transport(OpType op, size_t bytes) const override {
    return inner_.transport(op, bytes);
  }
  std::unique_ptr<ProcessGroup> split(int color, int key, std::string name,
                                      const GroupOptions& options) override {
    std::string kind = name;
    while (!kind.empty() && std::isdigit(static_cast<unsigned char>(kind.back()))) kind.pop_back();
    splits_.push_back(inner_.split(color, key, std::move(name), options));
    if (!splits_.back()) return nullptr;
    return std::make_unique<RecordingGroup>(*splits_.back(), &log, "[" + kind + "] ");
  }
  std::vector<std::string>& log;

 private:
  std::vector<std::string> own_log_;
  ProcessGroup& inner_;
  std::string prefix_;
  std::vector<std::unique_ptr<ProcessGroup>> splits_;
};

// Every collective completes at once: the order of issues is the schedule's alone.
class InstantBackend final : public ReplayBackend {
 public:
  // `replicated`: the shard group is split from the world (HSDP, DDP), not the world itself.
  explicit InstantBackend(bool replicated = false) : replicated_(replicated) {}
  int issue(const CollectiveCall& c) override {
    const char* prefix = c.group == GroupKind::node                   ? "[node] "
                         : c.group == GroupKind::column               ? "[across-nodes] "
                         : c.group == GroupKind::reshard              ? "[reshard] "
                         : c.group == GroupKind::replicas             ? "[replica] "
                         : c.group == GroupKind::shard && replicated_ ? "[shard] "
                                                                      : "";
    if (c.unit >= 0)
      log.push_back(fmt::format("{}{} {}", prefix, collective_kind_name(c.kind), int64_t(c.bytes)));
    return 0;
  }
  bool is_completed(int) override { return true; }
  void wait(int) override {}
  void compute(double, const char*, int) override {}
  double now() override { return 0; }
  std::vector<std::string> log;

 private:
  bool replicated_;
};

// One training step of a 3-layer GPT under FSDP on `world` in-process ranks (`per_node` to a
// pretend node): rank 0's collectives, its split groups' included, and a StepPlan of its units
// and quantization (no compute times) for the replay to run.
struct RecordedStep {
  std::vector<std::string> log;
  StepPlan plan;
  std::vector<std::string> schedule;  // the runtime's, by micro-batch (FsdpSchedule::describe)
};
RecordedStep record_step(const MeshShape& shape, int per_node, const FsdpOptions& options,
                         int micro_batches, float grad_scale) {
  const int world = shape.world();
  auto groups = FakeProcessGroup::create(world);
  if (per_node > 0)
    for (auto& g : groups) g->set_node_map(pretend_node_map(world, per_node));
  RecordedStep out;
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r)
    ranks.emplace_back([&, r] {
      GPT model(GPTConfig{3, 32, 4, 16, 256}, DType::bf16);
      std::vector<std::string> own;
      RecordingGroup group(*groups[size_t(r)], r == 0 ? &out.log : &own);
      DeviceMesh mesh(group, shape);
      FsdpRuntime fsdp(model, mesh, options, 7);
      Batch batch{Tensor::zeros("inputs", {2, 16}, DType::i32),
                  Tensor::zeros("targets", {2, 16}, DType::i32)};
      fsdp.begin_step(micro_batches);
      for (int m = 0; m < micro_batches; ++m) {
        fsdp.begin_micro_batch(m);
        model.forward_backward(batch, grad_scale, fsdp);
      }
      fsdp.finish_backward();
      if (r != 0) return;
      for (const UnitLayout& u : fsdp.units())
        out.plan.units.push_back({u.padded_numel, u.shard_numel});
      out.plan.quantized = fsdp.quantized();
      for (int m = 0; m < micro_batches; ++m) out.schedule.push_back(fsdp.schedule().describe(m));
    });
  for (auto& t : ranks) t.join();
  StepPlan& plan = out.plan;
  plan.compute.block_forward.assign(plan.units.size() - 1, 0.0);
  plan.compute.block_backward.assign(plan.units.size() - 1, 0.0);
  plan.reshard_after_forward = options.reshard_after_forward;
  plan.reshard_to = options.reshard_to;
  plan.gather_quantization = options.gather_quantization;
  plan.reduce_quantization = options.reduce_quantization;
  plan.prefetch = options.prefetch;
  plan.accumulation = options.accumulation;
  plan.replica_sync = options.replica_sync;
  plan.replicated = shape.dp_replicate > 1;
  plan.replicas = shape.dp_replicate;
  plan.micro_batches = micro_batches;
  return out;
}
RecordedStep record_step(int world, int per_node, const FsdpOptions& options, float grad_scale) {
  return record_step(MeshShape{.dp_shard = world}, per_node, options, 1, grad_scale);
}

// The backward puts the next block's all-gather on the communication thread before this
// block's reduce-scatter (its operations run one at a time: behind a reduce-scatter as long as
// a block's backward, the gather made the next block wait), and the replay does the same.
TEST(Simulate, BackwardGathersTheNextBlockBeforeReduceScatteringThisOne) {
  // Not a structured binding: clang 14 (the sanitized build) cannot capture one in a lambda.
  const RecordedStep step = record_step(2, 0, FsdpOptions{}, 1.0f / 64);
  const std::vector<std::string>& log = step.log;
  const StepPlan& plan = step.plan;
  // Units: the root, then blocks 0-2. The forward keeps block 2 for the backward, which
  // re-gathers blocks 1 and 0 (prefetch 1) and reduce-scatters 2, 1, 0, then the root.
  ASSERT_EQ(plan.units.size(), 4u);
  const auto gather = [&](int u) {
    return fmt::format("all-gather {}", plan.units[size_t(u)].padded_numel * 2);
  };
  const auto scatter = [&](int u) {
    return fmt::format("reduce-scatter {}", plan.units[size_t(u)].padded_numel * 4);
  };
  const std::vector<std::string> backward{gather(2),  gather(1),  scatter(3),
                                          scatter(2), scatter(1), scatter(0)};
  ASSERT_GE(log.size(), backward.size());
  EXPECT_EQ(std::vector<std::string>(log.end() - ptrdiff_t(backward.size()), log.end()), backward)
      << fmt::format("{}", fmt::join(log, "\n"));
  InstantBackend backend;
  RankReplay(plan, backend).run_step();
  EXPECT_EQ(backend.log, log);
}

TEST(Simulate, ReplayMirrorsTheRuntime) {
  struct Case {
    int prefetch;
    bool reshard;
    Accumulation accumulation;
    int micro;
  };
  for (const Case c :
       {Case{1, true, Accumulation::reduce_each, 1}, Case{0, true, Accumulation::reduce_each, 2},
        Case{2, false, Accumulation::reduce_each, 2},
        Case{1, true, Accumulation::reduce_last, 3}}) {
    FsdpOptions options;
    options.prefetch = c.prefetch;
    options.reshard_after_forward = c.reshard;
    options.accumulation = c.accumulation;
    const RecordedStep step = record_step(MeshShape{.dp_shard = 1}, 0, options, c.micro, 1.0f / 32);
    InstantBackend backend;
    RankReplay(step.plan, backend).run_step();
    EXPECT_EQ(backend.log, step.log)
        << "prefetch " << c.prefetch << ", reshard " << c.reshard << ", micro-batches " << c.micro;
  }
}

// Quantized collectives (qwZ gathers, qgZ's node reduce-scatters and exchange across nodes):
// the replay issues what FsdpRuntime issues, in order, with the encoded bytes. 4 in-process
// ranks on 2 pretend nodes; rank 0's log, its node and column groups' calls included.
TEST(Simulate, ReplayMirrorsQuantizedCollectives) {
  for (const int per_node : {1, 2}) {
    FsdpOptions options;
    options.gather_quantization = Quantization::int8;
    options.reduce_quantization = Quantization::int8;
    const RecordedStep step = record_step(4, per_node, options, 1.0f / 128);
    EXPECT_EQ(step.plan.quantized.reduce_per_node, per_node);
    InstantBackend backend;
    RankReplay(step.plan, backend).run_step();
    EXPECT_EQ(backend.log, step.log) << per_node << " rank(s) per node";
  }
}

// The runtime executes one schedule and the simulator replays the same one: on FSDP, HSDP and
// DDP meshes of 4 in-process ranks, ZeRO-3 and ZeRO-2, prefetch 1 and 2, 1 and 2
// micro-batches, hpZ, and the quantized collectives, rank 0's schedule is the replay's, action
// for action, and so are the collectives it issued, in order, on every group.
TEST(Simulate, ReplayRunsTheRuntimesScheduleOnEveryMesh) {
  struct Case {
    std::string name;
    MeshShape shape;
    int per_node = 0;
    FsdpOptions options;
    int micro = 1;
  };
  std::vector<Case> cases;
  const std::vector<std::pair<std::string, MeshShape>> meshes{
      {"FSDP 4", {.dp_shard = 4}},
      {"HSDP 2x2", {.dp_shard = 2, .dp_replicate = 2}},
      {"DDP 4", {.dp_shard = 1, .dp_replicate = 4}}};
  for (const auto& [mesh_name, shape] : meshes)
    for (const bool zero3 : {true, false})
      for (const int prefetch : {1, 2})
        for (const int micro : {1, 2}) {
          FsdpOptions o;
          o.reshard_after_forward = zero3;
          o.prefetch = prefetch;
          cases.push_back({fmt::format("{}, {}, prefetch {}, {} micro-batch(es)", mesh_name,
                                       zero3 ? "ZeRO-3" : "ZeRO-2", prefetch, micro),
                           shape, 0, o, micro});
        }
  FsdpOptions hpz;
  hpz.reshard_to = 2;
  cases.push_back({"FSDP 4, hpZ 2, 2 micro-batches", {.dp_shard = 4}, 2, hpz, 2});
  FsdpOptions last;
  last.accumulation = Accumulation::reduce_last;
  last.replica_sync = ReplicaSync::last;
  cases.push_back(
      {"HSDP 2x2, reduce_last, sync last", {.dp_shard = 2, .dp_replicate = 2}, 0, last, 2});
  FsdpOptions quantized;
  quantized.gather_quantization = quantized.reduce_quantization = Quantization::int8;
  cases.push_back({"FSDP 4 on 2 nodes, int8", {.dp_shard = 4}, 2, quantized, 2});
  FsdpOptions replicas_quantized;
  replicas_quantized.reduce_quantization = Quantization::int8;
  cases.push_back({"HSDP 2x2 on 2 nodes, int8 replicas",
                   {.dp_shard = 2, .dp_replicate = 2},
                   2,
                   replicas_quantized,
                   1});
  int compared = 0;
  for (const Case& c : cases) {
    const RecordedStep step = record_step(c.shape, c.per_node, c.options, c.micro, 1.0f / 128);
    InstantBackend backend(c.shape.dp_replicate > 1);
    RankReplay replay(step.plan, backend);
    ASSERT_EQ(step.schedule.size(), size_t(c.micro)) << c.name;
    for (int m = 0; m < c.micro; ++m)
      EXPECT_EQ(replay.schedule().describe(m), step.schedule[size_t(m)]) << c.name;
    replay.run_step();
    EXPECT_FALSE(step.log.empty()) << c.name;
    EXPECT_EQ(backend.log, step.log) << c.name;
    ++compared;
  }
  EXPECT_EQ(compared, 28);
}

TEST(Simulate, ComputeScalesByFlopsAndBytes) {
  // A profile of tiny whose times are exactly work / rates: the scaled prediction of small at
  // other rows must be small's work over the same rates.
  const ProfiledModel tiny{4, 256, 4, 256, 256, "none", "bf16"},
      small{6, 512, 8, 256, 256, "none", "bf16"};
  const double flops_rate = 500e9, bytes_rate = 8e9;
  const ModelWork w = profiled_work(tiny, 8);
  auto t = [&](const SegmentWork& s) { return s.flops / flops_rate + s.bytes / bytes_rate; };
  CalibrationProfile profile;
  profile.model = tiny;
  profile.cores = 4;
  ComputeSample s;
  s.ranks = 2;  // measured with two ranks on four cores: 0.5 ranks per core
  s.threads = 2;
  s.rows = 8;
  s.root_forward_pre = t(w.root_forward_pre);
  s.root_forward_post = t(w.root_forward_post);
  s.root_backward_pre = t(w.root_backward_pre);
  s.root_backward_post = t(w.root_backward_post);
  s.block_forward.assign(4, t(w.block_forward));
  s.block_backward.assign(4, t(w.block_backward));
  s.matmul_share = (w.total_flops(4) / flops_rate) / s.total();
  profile.compute = {s};
  ClusterSpec cluster;
  cluster.threads_per_rank = 2;
  cluster.ranks_per_node = 2;
  cluster.cores_per_node = 4;
  const ComputeTimes c = compute_times({small, 4, 2, std::nullopt}, cluster, &profile);
  const ModelWork ws = profiled_work(small, 4);
  EXPECT_NEAR(c.block_forward[0], t(ws.block_forward), 1e-9 * t(ws.block_forward));
  EXPECT_NEAR(c.block_backward[5], t(ws.block_backward), 1e-9 * t(ws.block_backward));
  EXPECT_NEAR(c.root_forward_post, t(ws.root_forward_post), 1e-9 * t(ws.root_forward_post));
  // The same shapes, rows and threads: the measurement itself.
  EXPECT_EQ(compute_times({tiny, 8, 2, std::nullopt}, cluster, &profile).block_forward,
            s.block_forward);
  // Ranks x threads beyond the node's cores: still the sample at one core per thread (the
  // engine shares the cores: AMachinesCoresAreShared).
  cluster.ranks_per_node = 4;
  EXPECT_EQ(compute_times({tiny, 8, 2, std::nullopt}, cluster, &profile).block_forward,
            s.block_forward);
  // Another family with tiny's very shapes is never taken for the measurement: a Llama is
  // scaled by its own work (Model::work), not GPT-2's formula.
  cluster.ranks_per_node = 2;
  LlamaConfig lc;
  lc.n_layer = 4, lc.n_embd = 256, lc.n_head = 4, lc.n_kv_head = 2, lc.ffn_hidden = 768;
  const Llama llama(lc, DType::bf16);
  ProfiledModel as_llama = tiny;
  as_llama.family = "llama";
  const ModelWork wl = llama.work(8, 256);
  const ComputeTimes cl = compute_times({as_llama, 8, 2, wl}, cluster, &profile);
  EXPECT_NEAR(cl.block_forward[0], t(wl.block_forward), 1e-9 * t(wl.block_forward));
  EXPECT_NEAR(cl.root_backward_pre, t(wl.root_backward_pre), 1e-9 * t(wl.root_backward_pre));
  EXPECT_NE(cl.block_forward[0], s.block_forward[0]);
}

// A small profile of `model` measured on machine "test" (2 cores).
CalibrationProfile test_profile(const ProfiledModel& model) {
  CalibrationProfile p;
  p.machine = "test";
  p.model = model;
  ComputeSample s;
  s.block_forward = {1e-3};
  s.block_backward = {2e-3};
  s.matmul_share = 0.5;
  p.compute = {s};
  p.memcpy_bandwidth = 5e9;
  p.matmul_peak[2] = 700e9;
  p.cores = 2;
  return p;
}

TEST(Simulate, ProfilesRoundTripAndNameWhatIsWrong) {
  CalibrationProfile p = test_profile({1, 64, 4, 256, 32, "none", "bf16"});
  p.links["tcp"] = {{2, {1e-5, 1e-9}, {1.5e-5, 2e-9}, {3e-5, 3e-9}},
                    {4, {1e-2, 1e-9}, {1e-2, 2e-9}, {}}};
  const CalibrationProfile q = profile_from_json(profile_to_json(p), "round trip");
  EXPECT_EQ(q.model, p.model);
  EXPECT_NEAR(q.compute[0].block_backward[0], 2e-3, 1e-15);
  EXPECT_NEAR(q.link("tcp", "test", 1.0).reduce_scatter.beta, 2e-9, 1e-21);
  EXPECT_EQ(q.link("tcp", "test", 1.0).ranks, 2);  // 2 ranks on 2 cores
  EXPECT_EQ(q.link("tcp", "test", 2.5).ranks, 4);  // nearest 4 on 2
  EXPECT_NEAR(q.link("tcp", "test", 1.0).all_reduce.alpha, 3e-5, 1e-18);
  EXPECT_NEAR(q.matmul_peak.at(2), 700e9, 1e-3);
  std::string text = profile_to_json(p);
  text.replace(text.find("\"memcpy_gbps\": 5.0"), 18, "\"memcpy_gbps\": -5.0");
  try {
    profile_from_json(text, "p.json");
    FAIL() << "a negative bandwidth was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("p.json: 'memcpy_gbps' = -5"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(p.link("ib", "cluster 'x'", 1.0), InputError);
  // A Llama profile keeps its family and own keys (integers, numbers, booleans); a key the
  // family does not read is refused naming it.
  CalibrationProfile llama = p;
  llama.model.family = "llama";
  llama.model.own = {{"model.n_kv_head", int64_t(2)},
                     {"model.rope_theta", 10000.0},
                     {"model.tie_embeddings", true}};
  EXPECT_EQ(profile_from_json(profile_to_json(llama), "llama").model, llama.model);
  std::string foreign = profile_to_json(llama);
  foreign.replace(foreign.find("\"model.n_kv_head\""), 17, "\"model.n_kvheads\"");
  try {
    profile_from_json(foreign, "l.json");
    FAIL() << "a foreign key was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "l.json: model.own: 'model.n_kvheads' is not a key of model.family = llama"),
              std::string::npos)
        << e.what();
  }
}

// A profile's closed-set words: an unknown one is refused naming the field, never read as the
// default ("none", "bf16").
TEST(Simulate, ProfileWordsAreChecked) {
  const CalibrationProfile p = test_profile({1, 64, 4, 256, 32, "selective", "fp32"});
  const std::string text = profile_to_json(p);
  EXPECT_EQ(profile_from_json(text, "p.json").model, p.model);
  for (const auto& [from, to, field] :
       {std::tuple{"\"selective\"", "\"partial\"", "activation_checkpointing"},
        std::tuple{"\"fp32\"", "\"fp16\"", "param_dtype"}}) {
    std::string bad = text;
    const size_t at = bad.find(from);
    ASSERT_NE(at, std::string::npos) << from << " in " << text;
    bad.replace(at, std::string(from).size(), to);
    try {
      profile_from_json(bad, "p.json");
      ADD_FAILURE() << field << " = " << to << " was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("model.") + field + " = " + to),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(Simulate, ClusterFilesAreStrict) {
  const std::string good = R"(
nodes = 2
ranks_per_node = 4
[compute]
matmul_gflops = 100
memory_gbps = 10
[intra_node]
bandwidth_gbps = 10
latency_us = 1
[inter_node]
bandwidth_gbit = 25
latency_us = 5
)";
  const ClusterSpec c = parse_cluster(good, "good.toml");
  EXPECT_EQ(c.world(), 8);
  EXPECT_NEAR(c.inter.bandwidth, 25e9 / 8, 1);
  EXPECT_NEAR(c.intra.latency, 1e-6, 1e-18);
  auto message = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    try {
      parse_cluster(text, "bad.toml");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(
      message("latency_us = 5", "latncy_us = 5")
          .find(
              "unknown cluster key 'inter_node.latncy_us' (did you mean 'inter_node.latency_us'?)"),
      std::string::npos);
  // Out of range, each message gives the key, the value and the range, never a bound the value
  // meets ("nodes = 1000000000 must be >= 1", "1e308 must be > 0").
  const std::string rate = "must be a finite positive number in [1e-09, 1e+12] Gbit/s";
  for (const std::string bad : {"-25", "0", "1e308", "1e-300", "inf", "nan"})
    EXPECT_NE(message("bandwidth_gbit = 25", "bandwidth_gbit = " + bad)
                  .find("'inter_node.bandwidth_gbit' = " + (bad == "1e308" ? "1e+308" : bad) + " " +
                        rate),
              std::string::npos)
        << bad;
  EXPECT_NE(message("bandwidth_gbps = 10", "bandwidth_gbps = 1e13")
                .find("'intra_node.bandwidth_gbps' = 10000000000000 must be a finite positive "
                      "number in [1e-09, 1e+12] GB/s"),
            std::string::npos);
  const std::string nodes = "must be a whole number of nodes in [1, 1048576]";
  EXPECT_NE(message("nodes = 2", "nodes = 0").find("'nodes' = 0 " + nodes), std::string::npos);
  EXPECT_NE(message("nodes = 2", "nodes = 1000000000").find("'nodes' = 1000000000 " + nodes),
            std::string::npos);
  EXPECT_NE(message("nodes = 2", "nodes = 1e9").find("'nodes' = 1000000000 " + nodes),
            std::string::npos);
  EXPECT_NE(message("nodes = 2", "nodes = 2.5").find("'nodes' = 2.5 " + nodes), std::string::npos);
  EXPECT_NE(message("nodes = 2", "nodes = \"2\"").find("'nodes' " + nodes), std::string::npos);
  EXPECT_EQ(parse_cluster(good.substr(0, good.find("nodes = 2")) + "nodes = 2e0" +
                              good.substr(good.find("nodes = 2") + 9),
                          "whole.toml")
                .nodes,
            2);
  EXPECT_NE(message("ranks_per_node = 4", "ranks_per_node = 0")
                .find("'ranks_per_node' = 0 must be an integer in [1, 65536]"),
            std::string::npos);
  EXPECT_NE(message("latency_us = 5", "latency_us = -1")
                .find("'inter_node.latency_us' = -1 must be a latency in [0, 1e+07] microseconds"),
            std::string::npos);
  // Nodes times ranks a node beyond an int's reach, or beyond the simulator's bound.
  EXPECT_NE(message("nodes = 2\nranks_per_node = 4", "nodes = 1048576\nranks_per_node = 4096")
                .find("'nodes' x 'ranks_per_node' = 1048576 x 4096 ranks must be at most 16777216"),
            std::string::npos);
  EXPECT_NE(message("matmul_gflops = 100", "").find("[compute] needs profile"), std::string::npos);
  EXPECT_NE(message("[inter_node]", "[fabric]\nkind = \"torus\"\n[inter_node]")
                .find("'fabric.kind' = 'torus'"),
            std::string::npos);
  EXPECT_NE(message("[inter_node]", "[inter_node]\nnic = \"per_gpu\"")
                .find("'inter_node.nic' = 'per_gpu' must be \"per_node\" or \"per_rank\""),
            std::string::npos);
  // A placement inside one node asks only for the links it uses: a profile measured without
  // --tcp predicts the bundled one-node cluster, and names the missing link for two nodes.
  LoadedCluster one_node = load_cluster("this-machine");
  auto no_tcp = std::make_shared<CalibrationProfile>(*one_node.profile);
  std::erase_if(no_tcp->links, [](const auto& kv) { return kv.first.rfind("tcp", 0) == 0; });
  one_node.profile = no_tcp;
  EXPECT_NO_THROW(platform_for(one_node, 2));
  try {
    platform_for(one_node, 4);
    ADD_FAILURE() << "two nodes without an inter-node link were accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("names link 'tcp'"), std::string::npos) << e.what();
  }
  // Every bundled cluster parses.
  for (const std::string& name : bundled_cluster_names())
    EXPECT_NO_THROW(load_cluster(name)) << name;
}

}  // namespace
}  // namespace st
