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

Folding::Folding(const RankLayout& layout, int represented)
    : layout_(layout), represented_(represented) {
  ST_CHECK(represented >= 1 && layout.nodes % represented == 0,
           "{} represented nodes do not divide {} nodes", represented, layout.nodes);
}

int Folding::fold(int rank) const {
  const int rpn = layout_.ranks_per_node;
  return layout_.node_of(rank) % represented_ * rpn + rank % rpn;
}

int Folding::represented_members(const GroupShape& g) const {
  if (g.first >= ranks()) return 0;
  return std::min(g.size, (ranks() - 1 - g.first) / g.stride + 1);
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
  const int shown = represented_members(g);
  if (q < shown) return g.member(q);
  // Beyond the represented ranks: a stand-in at half the represented span, when the span is a
  // power of two (so the pairs are mutual); else the folded partner, which the check judges.
  if (shown >= 2 && (shown & (shown - 1)) == 0) return g.member(g.index ^ (shown / 2));
  return fold(g.member(q));
}

std::string Folding::inconsistency() const {
  const RankLayout& L = layout_;
  auto crosses = [&](int a, int b) { return L.node_of(a) != L.node_of(b); };
  for (int r = 0; r < ranks(); ++r) {
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
      if (ring_left(right, kind) != r || L.group(right, kind).id != g.id ||
          crosses(r, real_right) != crosses(r, right))
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
  const int nodes = layout.nodes;
  if (layout.pp > 1) return nodes;
  for (int k = std::max(1, std::min(nodes, min_nodes)); k < nodes; ++k) {
    if (nodes % k != 0 || k % std::max(1, nodes_per_machine) != 0) continue;
    if (Folding(layout, k).inconsistency().empty()) return k;
  }
  return nodes;
}

}  // namespace st
