#include "parallel/fsdp/traffic.hpp"

#include "parallel/fsdp/unit_topology.hpp"

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

// Every group spanning `dim` (the mesh layout's), each once.
std::vector<std::vector<int>> groups_along(const MeshShape& mesh, MeshDim dim) {
  std::vector<std::vector<int>> out;
  for (int r = 0; r < int(mesh.world()); ++r)
    if (coord_of(mesh, r).at(dim) == 0) out.push_back(group_members(mesh, r, {dim}));
  return out;
}

// Each rank's payload per micro-batch (the replica all-reduce's per sync), by collective.
struct Payload {
  double gather = 0, regather = 0;  // all-gathers in the shard group; hpZ's in its groups
  double node_scatter = 0;          // FP32 reduce-scatters: the shard group's, or qgZ's node's
  double exchange = 0;              // qgZ's encoded all-to-all across nodes
  double replica = 0;               // the replica all-reduce (quantized: all-to-all + gather)
};

// As FsdpRuntime schedules it: every unit gathered for the forward; for the backward the
// blocks again (when resharded after their forward) but the last of the forward, which stays
// gathered; the root stays gathered through the micro-batch. hpZ's regathers move the decoded
// param_dtype values within their group.
Payload payload(const TrafficInputs& in, const QuantizedPlan& plan) {
  const auto& units = *in.units;
  const int S = in.mesh.dp_shard, R = in.mesh.dp_replicate, L = plan.reduce_per_node;
  const int64_t psize = int64_t(dtype_size(in.param_dtype));
  const int last = UnitTopology::root_and_chain(int(units.size())).last_forward();
  Payload p;
  for (const UnitLayout& u : units) {
    const double whole = double(psize * u.padded_numel);
    const double g =
        plan.gather ? double(S) * double(quantized_bytes(in.gather_quantization, u.shard_numel))
                    : whole;
    p.gather += g;
    const bool again = in.reshard_after_forward && !UnitTopology::is_root(u.unit) && u.unit != last;
    if (again && in.reshard_to > 1)
      p.regather += whole;
    else if (again)
      p.gather += g;
    if (L != 1) p.node_scatter += 4.0 * double(u.padded_numel);  // none with a rank a node
    if (L > 0)
      p.exchange += double(S / L) * double(quantized_bytes(in.reduce_quantization, u.shard_numel));
    p.replica +=
        plan.replicas
            ? 2.0 * R * double(quantized_bytes(in.reduce_quantization, (u.shard_numel + R - 1) / R))
            : 4.0 * double(u.shard_numel);
  }
  return p;
}

// The link bytes of shard group k's collectives in a step (payloads already times their count).
void add_shard_group(Traffic& t, const TrafficInputs& in, const std::vector<int>& members, int L,
                     double gathered, double regathered, double node_scatter, double exchange) {
  const int S = in.mesh.dp_shard;
  const auto part = [&](int first, int n) {
    return std::vector<int>(members.begin() + first, members.begin() + first + n);
  };
  add_ring(t, in.nodes, members, gathered * (S - 1) / S);
  // hpZ: the backward's gathers within each group of N consecutive members.
  const int N = in.reshard_to;
  for (int g = 0; N > 1 && g < S / N; ++g)
    add_ring(t, in.nodes, part(g * N, N), regathered * (N - 1) / N);
  if (L == 0) return add_ring(t, in.nodes, members, node_scatter * (S - 1) / S);
  // qgZ: an FP32 reduce-scatter within each node, then one encoded piece per segment from each
  // node to the segment's owner.
  const int K = S / L;
  for (int n = 0; n < K; ++n) add_ring(t, in.nodes, part(n * L, L), node_scatter * (L - 1) / L);
  for (int l = 0; l < L; ++l) {
    std::vector<int> column;
    for (int n = 0; n < K; ++n) column.push_back(members[size_t(n * L + l)]);
    add_all_to_all(t, in.nodes, column, exchange / K);
  }
}

}  // namespace

Traffic predict_traffic(const TrafficInputs& in) {
  const int S = in.mesh.dp_shard, R = in.mesh.dp_replicate, m = in.micro_batches;
  const auto shard_groups = groups_along(in.mesh, MeshDim::dp_shard);
  const auto replica_groups = groups_along(in.mesh, MeshDim::dp_replicate);
  const QuantizedPlan plan = plan_quantization(
      in.gather_quantization, in.reduce_quantization, node_of(in.nodes, shard_groups[0]),
      R > 1 ? node_of(in.nodes, replica_groups[0]) : std::vector<int>{});
  const Payload p = payload(in, plan);
  const int scatters = in.accumulation == Accumulation::reduce_each ? m : 1;
  const int syncs = (in.replica_sync == ReplicaSync::each && scatters > 1) ? m : 1;
  Traffic t;
  const double gathered = p.gather * m, regathered = p.regather * m;  // per rank
  const double replicated = p.replica * syncs;
  t.gathered = int64_t(gathered + regathered);
  t.regathered = int64_t(regathered);
  // Alone in its shard group a rank's backward writes its gradient shards in place.
  const bool in_place = gradients_in_place(S, plan.reduce_per_node > 0, in.accumulation, m);
  t.scattered = in_place ? 0 : int64_t((p.node_scatter + p.exchange) * scatters);
  t.replicated = R > 1 ? int64_t(replicated) : 0;
  for (const auto& members : shard_groups)
    add_shard_group(t, in, members, plan.reduce_per_node, gathered, regathered,
                    p.node_scatter * scatters, p.exchange * scatters);
  t.tp_reduced = in.mesh.tp > 1 ? int64_t(in.tp_bytes) : 0;
  for (const auto& members : groups_along(in.mesh, MeshDim::tp)) {
    const double p = double(members.size());
    if (in.tp_sequence_parallel)  // rings: each rank sends (p - 1) / p of each buffer
      add_ring(t, in.nodes, members, in.tp_bytes * (p - 1) / p);
    else
      add_all_reduce(t, in.nodes, members, in.tp_bytes);
  }
  for (const auto& members : replica_groups) {
    if (R == 1) break;
    if (!plan.replicas) {
      add_all_reduce(t, in.nodes, members, replicated);
      continue;
    }
    // An all-to-all of encoded chunks, then an all-gather of the encoded sums (as a ring).
    add_all_to_all(t, in.nodes, members, replicated / (2.0 * R));
    add_ring(t, in.nodes, members, replicated / 2.0 * (R - 1) / R);
  }
  return t;
}

}  // namespace st
