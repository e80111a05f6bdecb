#include "sharding/traffic.hpp"

#include "sharding/unit_topology.hpp"

namespace st {
namespace {

// Adds the link bytes of one collective over the group of world ranks `members` whose every
// hop carries `per_hop` bytes.
void add_ring(Traffic& t, const std::vector<int>& nodes, const std::vector<int>& members,
              double per_hop) {
  const size_t p = members.size();
  if (p < 2) return;
  for (size_t i = 0; i < p; ++i) {
    const bool crosses = nodes[size_t(members[i])] != nodes[size_t(members[(i + 1) % p])];
    (crosses ? t.inter_node : t.intra_node) += int64_t(per_hop);
  }
}

// An all-reduce of `bytes` per rank over `members` as Open MPI does it for large buffers:
// with a power-of-two group, Rabenseifner's (recursive-halving reduce-scatter, then
// recursive-doubling all-gather: at distance 2^k each rank sends bytes / 2^(k+1) twice);
// otherwise a ring (every hop carries 2 (p-1)/p of the buffer).
void add_all_reduce(Traffic& t, const std::vector<int>& nodes, const std::vector<int>& members,
                    double bytes) {
  const size_t p = members.size();
  if (p < 2) return;
  if ((p & (p - 1)) != 0) return add_ring(t, nodes, members, bytes * 2 * double(p - 1) / double(p));
  for (size_t mask = 1; mask < p; mask <<= 1)
    for (size_t i = 0; i < p; ++i) {
      const bool crosses = nodes[size_t(members[i])] != nodes[size_t(members[i ^ mask])];
      (crosses ? t.inter_node : t.intra_node) += int64_t(2 * bytes / double(2 * mask));
    }
}

// Every member sends a `piece` to every other member.
void add_all_to_all(Traffic& t, const std::vector<int>& nodes, const std::vector<int>& members,
                    double piece) {
  for (int i : members)
    for (int j : members)
      if (i != j)
        (nodes[size_t(i)] != nodes[size_t(j)] ? t.inter_node : t.intra_node) += int64_t(piece);
}

std::vector<int> node_of(const std::vector<int>& nodes, const std::vector<int>& members) {
  std::vector<int> out;
  for (int m : members) out.push_back(nodes[size_t(m)]);
  return out;
}

}  // namespace

Traffic predict_traffic(const TrafficInputs& in) {
  const auto& units = *in.units;
  const int S = in.mesh.shard, R = in.mesh.replicate, m = in.micro_batches;
  const int64_t psize = int64_t(dtype_size(in.param_dtype));
  // Shard groups: ranks k*S .. k*S + S - 1; replica groups: ranks j, j + S, ...
  const auto shard_group = [S](int k) {
    std::vector<int> g;
    for (int i = 0; i < S; ++i) g.push_back(k * S + i);
    return g;
  };
  const auto replica_group = [S, R](int j) {
    std::vector<int> g;
    for (int k = 0; k < R; ++k) g.push_back(k * S + j);
    return g;
  };
  const QuantizedPlan plan = plan_quantization(
      in.gather_quantization, in.reduce_quantization, node_of(in.nodes, shard_group(0)),
      R > 1 ? node_of(in.nodes, replica_group(0)) : std::vector<int>{});
  const Quantization gq = in.gather_quantization, rq = in.reduce_quantization;
  const int L = plan.reduce_per_node, K = L ? S / L : 0;
  // Per micro-batch, as FsdpRuntime schedules it: every unit gathered for the forward; for the
  // backward the blocks again (when resharded after their forward) but the last of the
  // forward, which stays gathered; the root stays gathered through the micro-batch. hpZ's
  // regathers move the decoded param_dtype values within their group.
  double gather = 0, regather = 0, node_scatter = 0, exchange = 0, replica = 0;
  const int last = UnitTopology::root_and_chain(int(units.size())).last_forward();
  for (const UnitLayout& u : units) {
    const double whole = double(psize * u.padded_numel);
    const double g = plan.gather ? double(S) * double(quantized_bytes(gq, u.shard_numel)) : whole;
    gather += g;
    if (in.reshard_after_forward && !UnitTopology::is_root(u.unit) && u.unit != last) {
      if (in.reshard_to > 1)
        regather += whole;
      else
        gather += g;
    }
    if (L == 0)
      node_scatter += 4.0 * double(u.padded_numel);
    else {
      if (L > 1) node_scatter += 4.0 * double(u.padded_numel);
      exchange += double(K) * double(quantized_bytes(rq, u.shard_numel));
    }
    replica += plan.replicas ? 2.0 * R * double(quantized_bytes(rq, (u.shard_numel + R - 1) / R))
                             : 4.0 * double(u.shard_numel);
  }
  const int scatters = in.accumulation == Accumulation::reduce_each ? m : 1;
  const int syncs = (in.replica_sync == ReplicaSync::each && scatters > 1) ? m : 1;
  Traffic t;
  const double gathered = gather * m, regathered = regather * m;  // per rank
  t.gathered = int64_t(gathered + regathered);
  t.regathered = int64_t(regathered);
  t.scattered = int64_t((node_scatter + exchange) * scatters);
  t.replicated = R > 1 ? int64_t(replica * syncs) : 0;
  for (int k = 0; k < R; ++k) {
    const std::vector<int> members = shard_group(k);
    add_ring(t, in.nodes, members, gathered * (S - 1) / S);
    // hpZ: the backward's gathers within each group of N consecutive members.
    const int N = in.reshard_to;
    for (int g = 0; N > 1 && g < S / N; ++g)
      add_ring(t, in.nodes, {members.begin() + g * N, members.begin() + (g + 1) * N},
               regathered * (N - 1) / N);
    if (L == 0) {
      add_ring(t, in.nodes, members, node_scatter * scatters * (S - 1) / S);
      continue;
    }
    // qgZ: an FP32 reduce-scatter within each node, then one encoded piece per segment from
    // each node to the segment's owner.
    for (int n = 0; n < K; ++n)
      add_ring(t, in.nodes, {members.begin() + n * L, members.begin() + (n + 1) * L},
               node_scatter * scatters * (L - 1) / L);
    for (int l = 0; l < L; ++l) {
      std::vector<int> column;
      for (int n = 0; n < K; ++n) column.push_back(members[size_t(n * L + l)]);
      add_all_to_all(t, in.nodes, column, exchange * scatters / K);
    }
  }
  for (int j = 0; j < S && R > 1; ++j) {
    if (!plan.replicas) {
      add_all_reduce(t, in.nodes, replica_group(j), replica * syncs);
      continue;
    }
    // An all-to-all of encoded chunks, then an all-gather of the encoded sums (as a ring).
    add_all_to_all(t, in.nodes, replica_group(j), replica * syncs / (2.0 * R));
    add_ring(t, in.nodes, replica_group(j), replica * syncs / 2.0 * (R - 1) / R);
  }
  return t;
}

}  // namespace st
