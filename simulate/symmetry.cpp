#include "simulate/symmetry.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"
#include "parallel/mesh_layout.hpp"

namespace st {

GroupShape RankLayout::group(int rank, GroupKind kind) const {
  // The runtime's groups (parallel/mesh_layout; a shard group's ranks are tp apart); ids
  // numbered shard groups first, then replica groups, the world, TP, reshard, node and column
  // groups (unique, not dense: reshard and node groups are named by their first rank).
  const int S = shard, R = replicate, T = tp, W = world();
  const MeshShape mesh{.dp_shard = S, .dp_replicate = R, .tp = T, .pp = pp};
  auto along = [&](MeshDim dim, int first_id) {
    const RankProgression p = progression(mesh, rank, {dim});
    return GroupShape{first_id + group_index(mesh, rank, {dim}), p.first, p.stride, p.size,
                      p.index};
  };
  const int replica_ids = W / S, world_id = replica_ids + W / R, tp_ids = world_id + 1,
            reshard_ids = tp_ids + W / T, node_ids = reshard_ids + W, column_ids = node_ids + W,
            pipeline_ids = column_ids + W;
  const GroupShape shard_group = along(MeshDim::dp_shard, 0);
  // The shard group's members j0, j0 + 1, ... (n of them) as a group of their own.
  auto run_of = [&](int id, int j0, int step, int n, int index) {
    return GroupShape{id, shard_group.member(j0), shard_group.stride * step, n, index};
  };
  switch (kind) {
    case GroupKind::shard:
      return shard_group;
    case GroupKind::replicas:
      return along(MeshDim::dp_replicate, replica_ids);
    case GroupKind::tp:
      return along(MeshDim::tp, tp_ids);
    case GroupKind::pipeline:
      return along(MeshDim::pp, pipeline_ids);
    case GroupKind::reshard: {
      if (reshard <= 1) return shard_group;
      const int j0 = block_of(shard_group.index, reshard) * reshard;
      return run_of(reshard_ids + shard_group.member(j0), j0, 1, reshard,
                    index_in_block(shard_group.index, reshard));
    }
    case GroupKind::node:
    case GroupKind::column: {
      const int L = reduce_per_node;
      if (L == 0) return shard_group;
      const int block = block_of(shard_group.index, L),
                place = index_in_block(shard_group.index, L);
      if (kind == GroupKind::node)
        return run_of(node_ids + shard_group.member(block * L), block * L, 1, L, place);
      return run_of(column_ids + shard_group.id * L + place, place, L, S / L, block);
    }
    case GroupKind::world:
      break;
  }
  return {world_id, 0, 1, W, rank};
}

namespace {
// Stage blocks: one per pipeline stage when the stages are whole nodes, else one (the world).
int stage_blocks(const RankLayout& layout) {
  return layout.pp > 1 && layout.nodes % layout.pp == 0 ? layout.pp : 1;
}
}  // namespace

Folding::Folding(const RankLayout& layout, int represented)
    : layout_(layout), blocks_(stage_blocks(layout)), block_nodes_(layout.nodes / blocks_) {
  ST_CHECK(
      represented >= 1 && represented % blocks_ == 0 && block_nodes_ % (represented / blocks_) == 0,
      "{} represented nodes are not the same divisor of each of {} stage blocks of {} nodes",
      represented, blocks_, block_nodes_);
  ST_CHECK(layout.pp == 1 || blocks_ > 1 || represented == layout.nodes,
           "pipeline stages sharing nodes are simulated on every node");
  k_ = represented / blocks_;
}

int Folding::real_rank(int index) const {
  const int K = k_ * layout_.ranks_per_node;
  return index / K * block_ranks() + index % K;
}

int Folding::simulated_index(int rank) const {
  ST_CHECK(represented(rank), "rank {} is not simulated", rank);
  const int K = k_ * layout_.ranks_per_node;
  return rank / block_ranks() * K + rank % block_ranks();
}

bool Folding::represented(int rank) const {
  return rank % block_ranks() < k_ * layout_.ranks_per_node;
}

int Folding::fold(int rank) const {
  const int rpn = layout_.ranks_per_node, block = rank / block_ranks(),
            node_in_block = rank % block_ranks() / rpn;
  return block * block_ranks() + node_in_block % k_ * rpn + rank % rpn;
}

int Folding::represented_in_block(const GroupShape& g, int block, int* first_index) const {
  // Members first + j x stride in [begin, begin + block_ranks()); represented: below
  // begin + k x ranks_per_node.
  const int begin = block * block_ranks(), shown_end = begin + k_ * layout_.ranks_per_node;
  const int j_lo = g.first >= begin ? 0 : (begin - g.first + g.stride - 1) / g.stride;
  if (first_index) *first_index = j_lo;
  if (j_lo >= g.size || shown_end <= g.first) return 0;
  const int j_end = std::min(g.size, (shown_end - 1 - g.first) / g.stride + 1);
  return std::max(0, j_end - j_lo);
}

int Folding::represented_members(const GroupShape& g) const {
  int n = 0;
  const int last_block = g.member(g.size - 1) / block_ranks();
  for (int b = g.first / block_ranks(); b <= last_block; ++b)
    n += represented_in_block(g, b, nullptr);
  return n;
}

int Folding::ring_right(int rank, GroupKind kind) const {
  const GroupShape g = layout_.group(rank, kind);
  return fold(g.member((g.index + 1) % g.size));
}

int Folding::ring_left(int rank, GroupKind kind) const {
  const GroupShape g = layout_.group(rank, kind);
  return fold(g.member((g.index + g.size - 1) % g.size));
}

int Folding::doubling_peer(int rank, GroupKind kind, int bit) const {
  const GroupShape g = layout_.group(rank, kind);
  const int q = g.index ^ bit;
  if (q >= g.size) return -1;
  if (represented(g.member(q))) return g.member(q);
  // Beyond the represented ranks of this block: a stand-in at half the represented span, when
  // the span is a power of two (so the pairs are mutual); else the folded partner, which the
  // check judges.
  int j0 = 0;
  const int shown = represented_in_block(g, rank / block_ranks(), &j0);
  if (shown >= 2 && (shown & (shown - 1)) == 0)
    return g.member(j0 + ((g.index - j0) ^ (shown / 2)));
  return fold(g.member(q));
}

std::string Folding::inconsistency() const {
  const RankLayout& L = layout_;
  auto crosses = [&](int a, int b) { return L.node_of(a) != L.node_of(b); };
  for (int i = 0; i < ranks(); ++i) {
    const int r = real_rank(i);
    for (int k = 0; k < kGroupKinds; ++k) {
      const GroupKind kind = GroupKind(k);
      const GroupShape g = L.group(r, kind);
      if (g.size == 1) continue;
      const bool one_node = L.node_of(g.first) == L.node_of(g.member(g.size - 1));
      if (one_node && represented_members(g) != g.size)
        return fmt::format("group {} lies in one node but is not represented whole", g.id);
      // Recursive doubling over a group that is not a power of two skips partners past its
      // end, so its ranks do not all send alike: such a group is simulated whole.
      if ((g.size & (g.size - 1)) != 0 && represented_members(g) != g.size)
        return fmt::format("group {} of {} ranks (not a power of two) is not represented whole",
                           g.id, g.size);
      const int real_right = g.member((g.index + 1) % g.size), right = ring_right(r, kind);
      const bool ring_used = !(kind == GroupKind::world && blocks_ > 1);
      if (ring_used && (ring_left(right, kind) != r || L.group(right, kind).id != g.id ||
                        crosses(r, real_right) != crosses(r, right)))
        return fmt::format("rank {}'s ring neighbour in group {} folds to rank {}", r, g.id, right);
      for (int bit = 1; bit < g.size; bit <<= 1) {
        const int q = g.index ^ bit, peer = doubling_peer(r, kind, bit);
        if ((q < g.size) != (peer >= 0))
          return fmt::format("rank {} loses its partner of round {} in group {}", r, bit, g.id);
        if (peer < 0) continue;
        if (doubling_peer(peer, kind, bit) != r || L.group(peer, kind).id != g.id ||
            crosses(r, g.member(q)) != crosses(r, peer))
          return fmt::format("rank {}'s partner of round {} in group {} folds to rank {}", r, bit,
                             g.id, peer);
      }
    }
  }
  return {};
}

int represented_nodes(const RankLayout& layout, int nodes_per_machine, int min_nodes) {
  const int nodes = layout.nodes, blocks = stage_blocks(layout), block_nodes = nodes / blocks;
  const int per_machine = std::max(1, nodes_per_machine);
  // Stages sharing a node, or a machine, behave unlike each other's: every node.
  if (layout.pp > 1 && (blocks == 1 || block_nodes % per_machine != 0)) return nodes;
  for (int k = std::max(1, std::min(block_nodes, min_nodes)); k < block_nodes; ++k) {
    if (block_nodes % k != 0 || k % per_machine != 0) continue;
    if (Folding(layout, k * blocks).inconsistency().empty()) return k * blocks;
  }
  return nodes;
}

}  // namespace st
