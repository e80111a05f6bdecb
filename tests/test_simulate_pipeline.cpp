// The simulator's pipelined step: the engine's replay of each schedule (SimGrid, messages over
// the platform's links) against simulate_pipeline's event-by-event replay of the same lists
// (parallel/pipeline/schedule.cpp, no network), on links of pure latency.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "parallel/mesh_layout.hpp"
#include "parallel/pipeline/schedule.hpp"
#include "simulate/engine.hpp"
#include "simulate/symmetry.hpp"

namespace st {
namespace {

// P ranks, each its own node; messages take `latency` whatever their size.
SimPlatform latency_only(int ranks, double latency) {
  SimPlatform p;
  p.nodes = ranks;
  p.links.intra_gather = p.links.intra_reduce = {latency, 0};
  p.links.inter_gather = p.links.inter_reduce = {latency, 0};
  return p;
}

// One block per stage, every rank its own stage(s): a block's forward `f`, backward `b`, of
// which the weight gradient takes `share`; the root costs nothing.
StepPlan pipelined(PipeSchedule kind, int ranks, int virtual_stages, int micro_batches, double f,
                   double b, double share) {
  const int stages = ranks * virtual_stages;
  StepPlan plan;
  plan.units.assign(size_t(stages + 1), {1024, 1024});
  plan.compute.block_forward.assign(size_t(stages), f);
  plan.compute.block_backward.assign(size_t(stages), b);
  plan.micro_batches = micro_batches;
  plan.accumulation = Accumulation::reduce_last;
  plan.pipeline.ranks = ranks;
  plan.pipeline.schedule = kind;
  plan.pipeline.virtual_stages = virtual_stages;
  for (int s = 0; s < stages; ++s) plan.pipeline.stages.push_back({s, s + 1});
  plan.pipeline.boundary_bytes = 4096;
  plan.pipeline.weight_share = share;
  return plan;
}

TEST(SimulatePipeline, EverySchedulesStepIsItsReplayPlusTheRootAndTheNorm) {
  const double ms = 1e-3, latency = 0.25 * ms, f = 1 * ms, b = 2 * ms, share = 0.4;
  struct Case {
    PipeSchedule kind;
    int ranks, virtual_stages, micro_batches;
  };
  for (const Case& c : std::vector<Case>{{PipeSchedule::gpipe, 2, 1, 4},
                                         {PipeSchedule::one_f_one_b, 2, 1, 4},
                                         {PipeSchedule::one_f_one_b, 4, 1, 8},
                                         {PipeSchedule::interleaved_1f1b, 2, 2, 4},
                                         {PipeSchedule::interleaved_1f1b, 4, 2, 8},
                                         {PipeSchedule::zero_bubble, 2, 1, 4},
                                         {PipeSchedule::zero_bubble, 4, 1, 8}}) {
    const StepPlan plan =
        pipelined(c.kind, c.ranks, c.virtual_stages, c.micro_batches, f, b, share);
    const SimResult r =
        simulate_step(latency_only(c.ranks, latency), {.pp = c.ranks}, plan, SimOptions{});
    const PipelineSchedule schedule(c.kind, {c.ranks, c.virtual_stages, c.micro_batches});
    const PipeTimeline t = simulate_pipeline(schedule, {f, b * (1 - share), b * share, latency});
    // The first and last ranks exchange the root's gradient shards (one latency), then the
    // norm's all-reduce over the world (recursive doubling: a latency per round).
    const double want = t.makespan + latency + std::ceil(std::log2(c.ranks)) * latency;
    const std::string what = fmt::format("{} P {} V {} M {}", pipe_schedule_name(c.kind), c.ranks,
                                         c.virtual_stages, c.micro_batches);
    EXPECT_NEAR(r.step, want, 1e-9) << what;
    // Each micro-batch crosses every boundary twice (its activation, its gradient); the root's
    // gradient shards once each way.
    const int stages = c.ranks * c.virtual_stages;
    EXPECT_DOUBLE_EQ(r.pp_bytes, 2.0 * (stages - 1) * c.micro_batches * 4096 + 2 * 1024 * 4)
        << what;
    // The bubble as the runtime measures it: 1 - the ranks' mean compute / the longest run
    // (which ends with the schedule's last action: it sends nothing).
    EXPECT_NEAR(r.pp_bubble, t.bubble(), 1e-8) << what;
    EXPECT_GT(r.pp_bubble, 0.05) << what;
  }
}

// The engine's groups under pipeline stages are the runtime's (parallel/mesh_layout: stages
// outermost), and a pipeline mesh is simulated on every node.
TEST(SimulatePipeline, GroupsOfAPipelineMeshAreTheRuntimes) {
  const MeshShape mesh{.dp_shard = 2, .dp_replicate = 1, .tp = 2, .pp = 2};
  RankLayout layout;
  layout.nodes = 4, layout.ranks_per_node = 2;
  layout.shard = 2, layout.tp = 2, layout.pp = 2;
  auto members = [&](int rank, GroupKind kind) {
    const GroupShape g = layout.group(rank, kind);
    std::vector<int> out;
    for (int j = 0; j < g.size; ++j) out.push_back(g.member(j));
    return out;
  };
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(members(r, GroupKind::pipeline), group_members(mesh, r, {MeshDim::pp})) << r;
    EXPECT_EQ(members(r, GroupKind::shard), group_members(mesh, r, {MeshDim::dp_shard})) << r;
    EXPECT_EQ(members(r, GroupKind::tp), group_members(mesh, r, {MeshDim::tp})) << r;
    EXPECT_EQ(layout.group(r, GroupKind::pipeline).index, coord_of(mesh, r).pp) << r;
  }
  EXPECT_EQ(members(5, GroupKind::pipeline), (std::vector<int>{1, 5}));
  // A stage's shard groups span both its nodes: one node of each cannot stand for them.
  EXPECT_EQ(represented_nodes(layout, 1, 1), 4);
  layout.pp = 1, layout.shard = 4;
  EXPECT_LT(represented_nodes(layout, 1, 1), 4);  // without stages the nodes fold too
}

// Folding under stages (symmetry.hpp): k nodes of each stage's block stand for all of it. The
// numbering of simulated ranks, by hand, on 8 nodes of 2 ranks in 2 stages of 4 nodes, 1 node
// of each represented; and the 405B-shaped layout's fold (TP 8 in a node, 128 shard ranks 8
// apart, 16 stages of 128 nodes): 4 nodes of each stage.
TEST(SimulatePipeline, FoldingKeepsEachStagesNodesApart) {
  RankLayout layout;
  layout.nodes = 8, layout.ranks_per_node = 2, layout.shard = 8, layout.pp = 2;
  const Folding f(layout, 2);
  EXPECT_EQ(f.ranks(), 4);
  EXPECT_EQ((std::vector<int>{f.real_rank(0), f.real_rank(1), f.real_rank(2), f.real_rank(3)}),
            (std::vector<int>{0, 1, 8, 9}));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(f.simulated_index(f.real_rank(i)), i);
  EXPECT_EQ(f.fold(7), 1);   // stage 0's node 3 onto its node 0
  EXPECT_EQ(f.fold(14), 8);  // stage 1's node 3 onto its node 0 (rank 8), not stage 0's
  EXPECT_FALSE(f.represented(2));
  EXPECT_THROW(Folding(layout, 3), Error);  // not the same count in each stage
  RankLayout big;
  big.nodes = 2048, big.ranks_per_node = 8, big.tp = 8, big.shard = 128, big.pp = 16;
  EXPECT_EQ(represented_nodes(big, 1), 64);
  EXPECT_EQ(Folding(big, 64).inconsistency(), "");
  // Stages that share a node behave unlike each other's ranks: every node.
  big.nodes = 8, big.ranks_per_node = 8, big.tp = 1, big.shard = 4;
  EXPECT_EQ(represented_nodes(big, 1, 1), 8);
}

// A folded pipeline mesh steps as the whole one: every schedule on 16 nodes of 2 ranks, 2
// stages (8 nodes each, 4 simulated), TP 2 inside a node and FSDP or HSDP across the stage's
// nodes, against --all-nodes: the step, the bubble and the bytes.
TEST(SimulatePipeline, FoldedStagesStepAsEveryNode) {
  SimPlatform p;
  p.nodes = 16, p.ranks_per_node = 2;
  p.links.intra_gather = p.links.intra_reduce = {1e-6, 0.1e-9};
  p.links.inter_gather = p.links.inter_reduce = {5e-6, 0.5e-9};
  p.links.fabric = FabricKind::fat_tree, p.links.oversubscription = 2;
  for (const PipeSchedule kind :
       {PipeSchedule::one_f_one_b, PipeSchedule::interleaved_1f1b, PipeSchedule::zero_bubble}) {
    for (const auto& [shard, replicate] : std::vector<std::pair<int, int>>{{8, 1}, {2, 4}}) {
      const int V = kind == PipeSchedule::interleaved_1f1b ? 2 : 1;
      StepPlan plan = pipelined(kind, 2, V, 4, 1e-3, 2e-3, 0.4);
      for (UnitPlan& u : plan.units) u = {1 << 20, (1 << 20) / shard};
      plan.replicated = replicate > 1, plan.replicas = replicate;
      plan.pipeline.boundary_bytes = 1 << 20;
      plan.tp = 2;
      plan.tp_calls.block_forward = {{TpOp::all_gather, 1 << 20}, {TpOp::reduce_scatter, 1 << 21}};
      plan.tp_calls.block_backward = {{TpOp::all_gather, 1 << 21}, {TpOp::all_reduce, 256}};
      const MeshShape mesh{.dp_shard = shard, .dp_replicate = replicate, .tp = 2, .pp = 2};
      SimOptions all;
      all.every_node = true;
      const SimResult folded = simulate_step(p, mesh, plan),
                      every = simulate_step(p, mesh, plan, all);
      const std::string what =
          fmt::format("{} {}x{} x tp 2 x pp 2", pipe_schedule_name(kind), shard, replicate);
      EXPECT_EQ(folded.simulated_ranks, 16) << what;
      EXPECT_EQ(every.simulated_ranks, 32) << what;
      EXPECT_NEAR(folded.step, every.step, 1e-3 * every.step) << what;
      EXPECT_NEAR(folded.pp_bubble, every.pp_bubble, 1e-3) << what;
      EXPECT_GT(folded.pp_bubble, 0.05) << what;
      EXPECT_NEAR(folded.inter_bytes, every.inter_bytes, 1e-9 * every.inter_bytes) << what;
      EXPECT_NEAR(folded.pp_bytes, every.pp_bytes, 1e-9 * every.pp_bytes) << what;
    }
  }
}

}  // namespace
}  // namespace st
