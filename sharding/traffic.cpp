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

}  // namespace

Traffic predict_traffic(const TrafficInputs& in) {
  const auto& units = *in.units;
  const int S = in.mesh.shard, R = in.mesh.replicate, m = in.micro_batches;
  const int64_t psize = int64_t(dtype_size(in.param_dtype));
  // Per micro-batch, as FsdpRuntime schedules it: every unit gathered for the forward; for the
  // backward the blocks again (when resharded after their forward) but the last of the
  // forward, which stays gathered; the root stays gathered through the micro-batch.
  int64_t gather_elems = 0, regather_elems = 0, all_elems = 0, shard_elems = 0;
  const int last = UnitTopology::root_and_chain(int(units.size())).last_forward();
  for (const UnitLayout& u : units) {
    all_elems += u.padded_numel;
    shard_elems += u.shard_numel;
    gather_elems += u.padded_numel;
    if (in.reshard_after_forward && !UnitTopology::is_root(u.unit) && u.unit != last)
      (in.reshard_to > 1 ? regather_elems : gather_elems) += u.padded_numel;
  }
  const int scatters = in.accumulation == Accumulation::reduce_each ? m : 1;
  const int syncs = (in.replica_sync == ReplicaSync::each && scatters > 1) ? m : 1;
  Traffic t;
  const double gathered = double(gather_elems * psize) * m;  // per shard group
  const double regathered = double(regather_elems * psize) * m;
  const double scattered = 4.0 * double(all_elems) * scatters;
  const double replicated = R > 1 ? 4.0 * double(shard_elems) * syncs : 0.0;  // per rank
  t.gathered = int64_t(gathered + regathered);
  t.regathered = int64_t(regathered);
  t.scattered = int64_t(scattered);
  t.replicated = int64_t(replicated);
  for (int k = 0; k < R; ++k) {  // shard groups: ranks k*S .. k*S + S - 1
    std::vector<int> members;
    for (int i = 0; i < S; ++i) members.push_back(k * S + i);
    add_ring(t, in.nodes, members, (gathered + scattered) * (S - 1) / S);
    // hpZ: the backward's gathers within each group of N consecutive members.
    const int N = in.reshard_to;
    for (int g = 0; N > 1 && g < S / N; ++g)
      add_ring(t, in.nodes, {members.begin() + g * N, members.begin() + (g + 1) * N},
               regathered * (N - 1) / N);
  }
  for (int j = 0; j < S && R > 1; ++j) {  // replica groups: ranks j, j + S, ...
    std::vector<int> members;
    for (int k = 0; k < R; ++k) members.push_back(k * S + j);
    add_all_reduce(t, in.nodes, members, replicated);
  }
  return t;
}

}  // namespace st
