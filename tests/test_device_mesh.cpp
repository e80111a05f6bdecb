// The mesh makes and keeps every group the runtime uses: each one's members, checked by
// gathering the world ranks over it, against the mesh arithmetic written out by hand (8
// in-process ranks as HSDP 2 replicas x 4 shards).
#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include "collectives/fake_process_group.hpp"
#include "parallel/device_mesh.hpp"
#include "tests/support/fake_ranks.hpp"

namespace st {
namespace {

// The world ranks of `group`'s members, in group-rank order.
std::vector<int> members(ProcessGroup& group, int world_rank) {
  Tensor mine = Tensor::empty("mine", {1}, DType::i32);
  mine.data<int32_t>()[0] = world_rank;
  Tensor all = Tensor::empty("all", {group.size()}, DType::i32);
  group.all_gather(mine, all)->wait();
  return {all.data<int32_t>(), all.data<int32_t>() + group.size()};
}

TEST(DeviceMesh, MakesEachGroupOnceWithTheMembersOfItsCoordinates) {
  std::mutex checked_mutex;
  int checked = 0;
  on_ranks(8, [&](ProcessGroup& world) {
    const int r = world.rank(), shard = r / 4, place = r % 4;
    DeviceMesh mesh(world, MeshShape{.dp_shard = 4, .dp_replicate = 2});
    EXPECT_EQ(members(mesh.shard_group(), r),
              (std::vector<int>{4 * shard, 4 * shard + 1, 4 * shard + 2, 4 * shard + 3}));
    ASSERT_NE(mesh.replica_group(), nullptr);
    EXPECT_EQ(members(*mesh.replica_group(), r), (std::vector<int>{place, place + 4}));
    EXPECT_EQ(mesh.replica_index(), shard);
    EXPECT_EQ(mesh.writes_checkpoint(), shard == 0);
    EXPECT_EQ(mesh.data_rank(), r);
    // hpZ's blocks of 2 within the shard group, made once.
    ProcessGroup& block = mesh.shard_block_group(2);
    EXPECT_EQ(&mesh.shard_block_group(2), &block);
    const int first = 4 * shard + place / 2 * 2;
    EXPECT_EQ(members(block, r), (std::vector<int>{first, first + 1}));
    // Two ranks per node: the node's pair, and the ranks at this place on every node.
    const DeviceMesh::NodeGroups nodes = mesh.shard_node_groups(2);
    ASSERT_NE(nodes.node, nullptr);
    ASSERT_NE(nodes.across_nodes, nullptr);
    EXPECT_EQ(members(*nodes.node, r), (std::vector<int>{first, first + 1}));
    EXPECT_EQ(members(*nodes.across_nodes, r),
              (std::vector<int>{4 * shard + place % 2, 4 * shard + place % 2 + 2}));
    EXPECT_EQ(mesh.shard_node_groups(2).node, nodes.node);
    std::lock_guard lock(checked_mutex);
    ++checked;
  });
  EXPECT_EQ(checked, 8);
}

// HSDP x TP on 8 ranks (replicas 2 x shards 2 x tp 2, rank = (replica * 2 + shard) * 2 + t): a TP
// group is two consecutive ranks; a shard group the ranks of one TP coordinate in a replica's
// block of four; the model group (the norm's) is that block; the data rank leaves tp out.
TEST(DeviceMesh, TensorParallelGroupsAreConsecutiveAndShardGroupsSkipThem) {
  std::mutex checked_mutex;
  int checked = 0;
  on_ranks(8, [&](ProcessGroup& world) {
    const int r = world.rank(), t = r % 2, shard = r / 2 % 2, replica = r / 4;
    DeviceMesh mesh(world, MeshShape{.dp_shard = 2, .dp_replicate = 2, .tp = 2});
    ASSERT_NE(mesh.tp_group(), nullptr);
    EXPECT_EQ(members(*mesh.tp_group(), r), (std::vector<int>{r - t, r - t + 1}));
    EXPECT_EQ(mesh.tp_rank(), t);
    EXPECT_EQ(members(mesh.shard_group(), r),
              (std::vector<int>{4 * replica + t, 4 * replica + t + 2}));
    ASSERT_NE(mesh.replica_group(), nullptr);
    EXPECT_EQ(members(*mesh.replica_group(), r), (std::vector<int>{r % 4, r % 4 + 4}));
    EXPECT_EQ(members(mesh.model_group(), r),
              (std::vector<int>{4 * replica, 4 * replica + 1, 4 * replica + 2, 4 * replica + 3}));
    EXPECT_EQ(mesh.data_rank(), replica * 2 + shard);
    EXPECT_EQ(mesh.data_ranks(), 4);
    std::lock_guard lock(checked_mutex);
    ++checked;
  });
  EXPECT_EQ(checked, 8);
}

// One rank per node: no node group; the ranks across nodes are the whole shard group. FSDP's
// shard group is the world itself.
TEST(DeviceMesh, OneRankPerNodeAndFsdp) {
  on_ranks(4, [&](ProcessGroup& world) {
    DeviceMesh mesh(world, MeshShape{.dp_shard = 4});
    EXPECT_EQ(&mesh.shard_group(), &world);
    EXPECT_EQ(mesh.replica_group(), nullptr);
    EXPECT_TRUE(mesh.writes_checkpoint());
    const DeviceMesh::NodeGroups nodes = mesh.shard_node_groups(1);
    EXPECT_EQ(nodes.node, nullptr);
    ASSERT_NE(nodes.across_nodes, nullptr);
    EXPECT_EQ(members(*nodes.across_nodes, world.rank()), (std::vector<int>{0, 1, 2, 3}));
  });
}

}  // namespace
}  // namespace st
