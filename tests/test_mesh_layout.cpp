// The mesh's arithmetic (parallel/mesh_layout) against hand-computed groups, the 2-D formulas
// it replaced (shard group r / S, replica group r % S), and itself (round trips, partitions).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/error.hpp"
#include "parallel/mesh_layout.hpp"

namespace st {
namespace {

const std::vector<MeshShape> kShapes = {{},
                                        {.dp_shard = 4},
                                        {.dp_shard = 2, .dp_replicate = 3},
                                        {.dp_replicate = 4},
                                        {.dp_shard = 2, .dp_replicate = 2, .tp = 2, .pp = 2},
                                        {.dp_shard = 2, .tp = 4, .pp = 3},
                                        {.dp_shard = 3, .dp_replicate = 2, .tp = 2}};

const std::vector<MeshDims> kGroups = {{MeshDim::pp},
                                       {MeshDim::dp_replicate},
                                       {MeshDim::dp_shard},
                                       {MeshDim::tp},
                                       {MeshDim::dp_replicate, MeshDim::dp_shard},
                                       {MeshDim::pp, MeshDim::tp}};

TEST(MeshLayout, CoordinatesRoundTripWithTpInnermost) {
  int checked = 0;
  for (const MeshShape& shape : kShapes)
    for (int r = 0; r < shape.world(); ++r) {
      const MeshCoord c = coord_of(shape, r);
      ASSERT_EQ(rank_of(shape, c), r);
      ASSERT_EQ(c.tp, r % shape.tp);                    // consecutive ranks are one TP group
      ASSERT_EQ(c.pp, r / (shape.world() / shape.pp));  // a stage is a block of ranks
      ++checked;
    }
  EXPECT_EQ(checked, 1 + 4 + 6 + 4 + 16 + 24 + 12);
  EXPECT_THROW(coord_of({.dp_shard = 4}, 4), Error);
  EXPECT_THROW(rank_of({.dp_shard = 4}, {.dp_shard = 4}), Error);
}

// pp 2 x dp_replicate 2 x dp_shard 2 x tp 2, by hand: rank 5 is (0, 1, 0, 1).
TEST(MeshLayout, HandComputedGroupsOfA4DMesh) {
  const MeshShape shape{.dp_shard = 2, .dp_replicate = 2, .tp = 2, .pp = 2};
  EXPECT_EQ(coord_of(shape, 5), (MeshCoord{.dp_shard = 0, .dp_replicate = 1, .tp = 1, .pp = 0}));
  EXPECT_EQ(group_members(shape, 5, {MeshDim::tp}), (std::vector<int>{4, 5}));
  EXPECT_EQ(group_members(shape, 5, {MeshDim::dp_shard}), (std::vector<int>{5, 7}));
  EXPECT_EQ(group_members(shape, 5, {MeshDim::dp_replicate}), (std::vector<int>{1, 5}));
  EXPECT_EQ(group_members(shape, 5, {MeshDim::pp}), (std::vector<int>{5, 13}));
  EXPECT_EQ(group_members(shape, 5, {MeshDim::dp_replicate, MeshDim::dp_shard}),
            (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(rank_in_group(shape, 5, {MeshDim::dp_replicate, MeshDim::dp_shard}), 2);
  const RankProgression dp = progression(shape, 5, {MeshDim::dp_replicate, MeshDim::dp_shard});
  EXPECT_EQ(dp.first, 1);
  EXPECT_EQ(dp.stride, 2);
  EXPECT_EQ(dp.size, 4);
  EXPECT_EQ(dp.index, 2);
  EXPECT_THROW(progression(shape, 5, {MeshDim::pp, MeshDim::tp}), Error);
}

// Each kind of group partitions the world: every rank in exactly one, all members of a group
// agreeing on its index and each knowing its own place.
TEST(MeshLayout, GroupsPartitionTheWorld) {
  int groups_checked = 0;
  for (const MeshShape& shape : kShapes)
    for (const MeshDims& dims : kGroups) {
      std::set<int> indices;
      std::vector<int> seen(size_t(shape.world()), 0);
      for (int r = 0; r < shape.world(); ++r) {
        const std::vector<int> members = group_members(shape, r, dims);
        ASSERT_EQ(int(members.size()), group_size(shape, dims));
        ASSERT_TRUE(std::is_sorted(members.begin(), members.end()));
        ASSERT_EQ(members[size_t(rank_in_group(shape, r, dims))], r);
        for (int m : members) ASSERT_EQ(group_index(shape, m, dims), group_index(shape, r, dims));
        if (members.front() == r) {
          indices.insert(group_index(shape, r, dims));
          for (int m : members) ++seen[size_t(m)];
        }
      }
      EXPECT_EQ(int(indices.size()), int(shape.world()) / group_size(shape, dims));
      EXPECT_EQ(*indices.rbegin(), int(indices.size()) - 1);
      EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), shape.world());
      ++groups_checked;
    }
  EXPECT_EQ(groups_checked, int(kShapes.size() * kGroups.size()));
}

// The 2-D mesh's formulas this replaced: shard group r / S (rank r % S in it), replica group
// r % S (rank r / S in it).
TEST(MeshLayout, TwoDimensionsAsBefore) {
  int checked = 0;
  for (int S : {1, 2, 3, 4})
    for (int R : {1, 2, 3}) {
      const MeshShape shape{.dp_shard = S, .dp_replicate = R};
      for (int r = 0; r < S * R; ++r) {
        EXPECT_EQ(group_index(shape, r, {MeshDim::dp_shard}), r / S);
        EXPECT_EQ(rank_in_group(shape, r, {MeshDim::dp_shard}), r % S);
        EXPECT_EQ(group_index(shape, r, {MeshDim::dp_replicate}), r % S);
        EXPECT_EQ(rank_in_group(shape, r, {MeshDim::dp_replicate}), r / S);
        ++checked;
      }
    }
  EXPECT_EQ(checked, 10 * 6);
}

// Hand-written: the node map sharding.ranks_per_node pretends on one host.
TEST(MeshLayout, PretendNodeMapsAreConsecutiveBlocks) {
  EXPECT_EQ(pretend_node_map(6, 2), (std::vector<int>{0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(pretend_node_map(6, 3), (std::vector<int>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(pretend_node_map(4, 4), (std::vector<int>{0, 0, 0, 0}));
  EXPECT_EQ(pretend_node_map(3, 1), (std::vector<int>{0, 1, 2}));
}

TEST(MeshLayout, Describes) {
  EXPECT_EQ(describe_mesh({.dp_shard = 4}), "FSDP over 4 ranks");
  EXPECT_EQ(describe_mesh({.dp_shard = 2, .dp_replicate = 2}), "HSDP: 2 replicas x 2 shards");
  EXPECT_EQ(describe_mesh({.dp_replicate = 4}), "DDP over 4 replicas (dp_shard 1)");
  EXPECT_EQ(describe_mesh({.tp = 4}), "TP over 4 ranks");
  EXPECT_EQ(describe_mesh({.dp_shard = 2, .tp = 2}), "FSDP over 2 ranks x TP 2");
  EXPECT_EQ(describe_mesh({.dp_shard = 2, .dp_replicate = 2, .tp = 2}),
            "HSDP: 2 replicas x 2 shards x TP 2");
}

}  // namespace
}  // namespace st
