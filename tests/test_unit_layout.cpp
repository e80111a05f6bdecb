// Unit layout: flat offsets, padding to the world size, and which elements each rank owns,
// checked against hand-computed values.
#include <gtest/gtest.h>

#include "collectives/fake_process_group.hpp"
#include "parallel/fsdp/fsdp_runtime.hpp"
#include "parallel/fsdp/traffic.hpp"
#include "parallel/fsdp/unit_layout.hpp"
#include "tests/support/mlp.hpp"

namespace st {
namespace {

std::vector<ParamSpec> specs() {
  // Unit 0: a [2,3] (6) and b [4] -> 10 elements. Unit 1: c [5] -> 5 elements.
  return {{"root.a", {2, 3}, InitKind::zeros, 0, false, 0},
          {"h.0.c", {5}, InitKind::zeros, 0, false, 1},
          {"root.b", {4}, InitKind::zeros, 0, false, 0}};
}

TEST(UnitLayout, FlatOffsetsAndPaddingByHand) {
  const auto s = specs();
  const auto units = layout_units(s, 2, 3);
  ASSERT_EQ(units.size(), 2u);
  EXPECT_EQ(units[0].name, "root");
  EXPECT_EQ(units[0].params, (std::vector<size_t>{0, 2}));
  EXPECT_EQ(units[0].flat_offsets, (std::vector<int64_t>{0, 6}));
  EXPECT_EQ(units[0].numel, 10);
  EXPECT_EQ(units[0].shard_numel, 4);  // ceil(10 / 3)
  EXPECT_EQ(units[0].padded_numel, 12);
  EXPECT_EQ(units[1].name, "h.0.c");
  EXPECT_EQ(units[1].shard_numel, 2);
  EXPECT_EQ(units[1].padded_numel, 6);
}

TEST(UnitLayout, SegmentsCoverEachElementOnce) {
  const auto s = specs();
  const auto units = layout_units(s, 2, 3);
  // Rank 1 owns flat [4, 8) of the root: a[4..6) then b[0..2).
  const auto seg = units[0].segments(s, 1);
  ASSERT_EQ(seg.size(), 2u);
  EXPECT_EQ(seg[0].param, 0u);
  EXPECT_EQ(seg[0].param_offset, 4);
  EXPECT_EQ(seg[0].shard_offset, 0);
  EXPECT_EQ(seg[0].numel, 2);
  EXPECT_EQ(seg[1].param, 2u);
  EXPECT_EQ(seg[1].param_offset, 0);
  EXPECT_EQ(seg[1].shard_offset, 2);
  EXPECT_EQ(seg[1].numel, 2);
  // Rank 2 owns flat [8, 12): b[2..4) and two padding elements.
  const auto last = units[0].segments(s, 2);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].param_offset, 2);
  EXPECT_EQ(last[0].numel, 2);
  // Over all ranks every element of every parameter is owned exactly once.
  for (const auto& unit : units) {
    int64_t owned = 0;
    for (int r = 0; r < 3; ++r)
      for (const auto& g : unit.segments(s, r)) owned += g.numel;
    EXPECT_EQ(owned, unit.numel) << unit.name;
  }
}

TEST(UnitLayout, RanksBeyondASmallUnitOwnOnlyPadding) {
  const auto s = specs();
  // Unit h.0.c has 5 elements: at 4 ranks shards of 2 (8 padded); rank 2 owns c[4] and one
  // element of padding, rank 3 only padding (as FSDP2's empty shards), and at 8 ranks shards
  // of 1 leave ranks 5-7 with padding only.
  const auto units = layout_units(s, 2, 4);
  EXPECT_EQ(units[1].shard_numel, 2);
  EXPECT_EQ(units[1].padded_numel, 8);
  const auto rank2 = units[1].segments(s, 2);
  ASSERT_EQ(rank2.size(), 1u);
  EXPECT_EQ(rank2[0].param_offset, 4);
  EXPECT_EQ(rank2[0].numel, 1);
  EXPECT_TRUE(units[1].segments(s, 3).empty());
  const auto eight = layout_units(s, 2, 8);
  EXPECT_EQ(eight[1].shard_numel, 1);
  for (int r = 0; r < 8; ++r) EXPECT_EQ(eight[1].segments(s, r).size(), r < 5 ? 1u : 0u) << r;
}

// The unit topology is stated once and checked on every hook call: a model that enters its
// units out of the root-and-chain order is an error naming the model and the units.
TEST(UnitTopology, RootAndChainOrdersAndTheCheck) {
  const UnitTopology t = UnitTopology::root_and_chain(4);
  EXPECT_EQ(t.forward, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(t.backward, (std::vector<int>{0, 3, 2, 1}));
  EXPECT_EQ(t.blocks(), 3);
  EXPECT_EQ(t.last_forward(), 3);

  MLP mlp({.vocab_size = 16, .n_embd = 4, .hidden = 4}, DType::f32);
  auto group = FakeProcessGroup::create(1);
  DeviceMesh mesh(*group.front(), MeshShape{.dp_shard = 1});
  FsdpRuntime fsdp(mlp, mesh, FsdpOptions{.param_dtype = DType::f32}, 1);
  fsdp.before_forward(0);
  try {
    fsdp.before_forward(2);  // unit 1 skipped
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model 'MLP V=16 D=4 H=4' entered unit 2 for forward "
                                         "out of order (expected 1)"),
              std::string::npos)
        << e.what();
  }
  fsdp.reshard_all();
}

// The traffic prediction with tensor parallelism, by hand: 4 ranks as dp_shard 2 x tp 2 on two
// nodes of 2 (ranks 0-1, 2-3). TP groups are consecutive ranks, so {0,1} and {2,3} all-reduce
// within a node; shard groups take every tp-th rank, {0,2} and {1,3}, so every gather and
// reduce-scatter hop crosses nodes. One root unit of 1000 elements (BF16 gathers, 2000 bytes;
// FP32 reduce-scatter, 4000 bytes), 800 bytes of TP all-reduce per rank.
TEST(Traffic, TensorParallelGroupsAndStridedShardGroupsOnTheirNodes) {
  UnitLayout root;
  root.unit = 0, root.name = "root", root.numel = 1000, root.padded_numel = 1000;
  root.shard_numel = 500;
  const std::vector<UnitLayout> units{root};
  TrafficInputs in{&units, MeshShape{.dp_shard = 2, .tp = 2}, {0, 0, 1, 1}};
  in.tp_bytes = 800;
  const Traffic t = predict_traffic(in);
  EXPECT_EQ(t.gathered, 2000);
  EXPECT_EQ(t.scattered, 4000);
  EXPECT_EQ(t.tp_reduced, 800);
  // Each shard group: a ring of 2 hops carrying half the gather and half the reduce-scatter.
  EXPECT_EQ(t.inter_node, 2 * 2 * (1000 + 2000));
  // Each TP group: an all-reduce of 2 ranks sends the 800 bytes once each way.
  EXPECT_EQ(t.intra_node, 2 * 2 * 800);
}

}  // namespace
}  // namespace st
