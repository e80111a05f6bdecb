#include "bench/bench_collectives.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "collectives/mpi_process_group.hpp"
#include "core/stats.hpp"
#include "core/timer.hpp"

namespace st {
namespace {

// Median over repeats of the slowest rank's time for one call of `op`.
template <class Op>
double time_us(ProcessGroup& g, int repeats, Op&& op) {
  Tensor slowest = Tensor::empty("bench.time", {1}, DType::f64);
  const AllReduceOptions max{ReduceOp::max};
  op();  // warm-up (window allocation, first-touch)
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    g.barrier()->wait();
    Timer t;
    op();
    slowest.data<double>()[0] = t.seconds() * 1e6;
    g.all_reduce(slowest, max)->wait();
    times.push_back(slowest.data<double>()[0]);
  }
  return median(times);
}

}  // namespace

namespace {

// One row of the table (or one JSON line): `algorithm` is the label ("auto:shm", "memcpy",
// "symm": shm with every buffer in symmetric memory, each byte copied once).
struct Row {
  OpType op;
  DType dtype;
  int64_t bytes;  // the whole (unsharded) buffer
  int ranks;
  std::string algorithm, chosen;
  double us, mpi_us, memcpy_us;
};

void print_row(const Row& r, bool json) {
  const double algbw = double(r.bytes) / (r.us * 1e-6) / 1e9;
  const bool copy = r.algorithm == "memcpy";
  // An all-reduce moves its buffer twice (reduce-scatter, then all-gather) over each link.
  const double links = r.op == OpType::all_reduce ? 2.0 : 1.0;
  const double busbw = copy ? algbw : links * algbw * double(r.ranks - 1) / double(r.ranks);
  if (json) {
    nlohmann::json j = {{"op", op_name(r.op)},      {"dtype", dtype_name(r.dtype)},
                        {"algorithm", r.algorithm}, {"bytes", r.bytes},
                        {"ranks", r.ranks},         {"time_us", r.us},
                        {"algbw_gbps", algbw},      {"busbw_gbps", busbw}};
    if (!copy) j["chosen"] = r.chosen;
    if (r.memcpy_us > 0) j["vs_memcpy"] = r.memcpy_us / r.us;
    fmt::print("{}\n", j.dump());
    return;
  }
  const std::string label = r.algorithm == "auto" ? "auto:" + r.chosen : r.algorithm;
  fmt::print("{:<15} {:>6} {:>10} {:>7} {:>12.1f} {:>10.2f} {:>10} {:>8.1f}x {:>9}\n",
             op_name(r.op), dtype_name(r.dtype), r.bytes, label, r.us, algbw,
             copy ? std::string("-") : fmt::format("{:.2f}", busbw), r.mpi_us / r.us,
             r.memcpy_us > 0 ? fmt::format("{:.2f}x", r.memcpy_us / r.us) : std::string("-"));
}

// Every algorithm for one operation and size, the shared-memory one again with its buffers in
// symmetric memory (`symmetric`: room for the largest size), then memcpy of the same bytes
// (the limit: one copy of every byte of the whole buffer).
void bench_size(MpiProcessGroup& g, OpType op, DType dtype, int64_t per_rank,
                const Tensor& symmetric, bool json) {
  const int n = g.size();
  const int64_t used = per_rank * n;
  const int64_t bytes = used * int64_t(dtype_size(dtype));
  const int repeats = int(std::clamp<int64_t>((int64_t(256) << 20) / bytes, 11, 50));
  Tensor full = Tensor::zeros("bench.full", {used}, dtype);
  Tensor shard = Tensor::zeros("bench.shard", {per_rank}, dtype);
  Tensor copy = Tensor::zeros("bench.copy", {used}, dtype);
  const bool print = g.rank() == 0;
  if (op == OpType::all_reduce) {
    // FP32 sum in place: Open MPI's own algorithm, and (TP's row-parallel sums without
    // sequence parallelism) the buffer in symmetric memory, read in place.
    const double mpi_us = time_us(g, repeats, [&] { g.all_reduce(full)->wait(); });
    if (print) print_row({op, dtype, bytes, n, "mpi", "mpi", mpi_us, mpi_us, 0}, json);
    if (g.single_node() && g.symmetric_capacity() >= size_t(bytes)) {
      Tensor in_heap = symmetric.carve("bench.symmetric", {used}, dtype, 0);
      std::memset(in_heap.raw(), 0, in_heap.nbytes());
      const uint64_t before = g.symmetric_ops();
      const double us = time_us(g, repeats, [&] { g.all_reduce(in_heap)->wait(); });
      ST_CHECK(g.symmetric_ops() > before, "bench collectives: the symmetric path did not run");
      if (print) print_row({op, dtype, bytes, n, "symm", "shm", us, mpi_us, 0}, json);
    }
    std::fflush(stdout);
    return;
  }
  std::vector<Row> rows;
  for (Algorithm a : {Algorithm::mpi, Algorithm::ring, Algorithm::shm, Algorithm::automatic}) {
    if (a == Algorithm::shm && !g.single_node()) continue;
    const double us = time_us(g, repeats, [&] {
      if (op == OpType::all_gather)
        g.all_gather(shard, full, a)->wait();
      else
        g.reduce_scatter(full, shard, a)->wait();
    });
    const Algorithm chosen = a == Algorithm::automatic ? g.choose(op, size_t(bytes)) : a;
    rows.push_back({op, dtype, bytes, n, algorithm_name(a), algorithm_name(chosen), us, 0, 0});
  }
  if (g.single_node() && g.symmetric_capacity() >= size_t(bytes)) {
    // FSDP's use: the all-gather in place into a symmetric output, the reduce-scatter from a
    // symmetric input.
    Tensor in_heap = symmetric.carve("bench.symmetric", {used}, dtype, 0);
    std::memcpy(in_heap.raw(), full.raw(), full.nbytes());
    const uint64_t before = g.symmetric_ops();
    const double us = time_us(g, repeats, [&] {
      if (op == OpType::all_gather)
        g.all_gather(in_heap.slice(g.rank() * per_rank, (g.rank() + 1) * per_rank), in_heap,
                     Algorithm::shm)
            ->wait();
      else
        g.reduce_scatter(in_heap, shard, Algorithm::shm)->wait();
    });
    ST_CHECK(g.symmetric_ops() > before, "bench collectives: the symmetric path did not run");
    rows.push_back({op, dtype, bytes, n, "symm", "shm", us, 0, 0});
  }
  const double memcpy_us =
      time_us(g, repeats, [&] { std::memcpy(copy.raw(), full.raw(), full.nbytes()); });
  rows.push_back({op, dtype, bytes, n, "memcpy", "memcpy", memcpy_us, 0, 0});
  for (Row& r : rows) {
    r.mpi_us = rows.front().us;
    r.memcpy_us = r.algorithm == "memcpy" ? 0 : memcpy_us;
    if (print) print_row(r, json);
  }
  std::fflush(stdout);
}

// Between hosts: latency (8-byte all-reduce, a round trip) and one-way bandwidth (16 MiB
// broadcast) of the link between rank 0 and the first rank on another node, beside the cap
// that launch/shardrun --link-gbit put on it (SHARDRUN_LINK_GBIT), if any.
void bench_link(MpiProcessGroup& world, bool json) {
  const auto& nodes = world.nodes();
  int peer = -1;
  for (int r = 1; r < world.size() && peer < 0; ++r)
    if (nodes[size_t(r)] != nodes[0]) peer = r;
  if (peer < 0) return;  // one node: no link to measure
  const bool member = world.rank() == 0 || world.rank() == peer;
  auto pair = world.split(member ? 0 : -1, world.rank(), "link");
  if (pair) {
    Tensor word = Tensor::zeros("link.word", {1}, DType::f64);
    Tensor bulk = Tensor::zeros("link.bulk", {int64_t(16) << 20}, DType::u8);
    const double latency_us = time_us(*pair, 51, [&] { pair->all_reduce(word)->wait(); });
    const double bulk_us = time_us(*pair, 11, [&] { pair->broadcast(bulk, 0)->wait(); });
    const double gbps = double(bulk.nbytes()) * 8 / (bulk_us * 1e-6) / 1e9;
    const char* cap_text = std::getenv("SHARDRUN_LINK_GBIT");
    const double cap = cap_text ? std::atof(cap_text) : 0.0;
    if (world.rank() == 0) {
      if (json)
        fmt::print("{}\n", nlohmann::json{{"op", "link"},
                                          {"ranks", 2},
                                          {"peer", peer},
                                          {"latency_us", latency_us},
                                          {"bytes", bulk.nbytes()},
                                          {"time_us", bulk_us},
                                          {"gbps", gbps},
                                          {"cap_gbps", cap}}
                               .dump());
      else
        fmt::print(
            "link node {} -> node {} (rank 0 -> {}): 8-byte all-reduce {:.1f} us (a round trip); "
            "16 MiB broadcast {:.2f} Gbit/s{}\n",
            nodes[0], nodes[size_t(peer)], peer, latency_us, gbps,
            cap > 0 ? fmt::format(" = {:.0f}% of the {:g} Gbit/s cap", 100 * gbps / cap, cap)
                    : std::string(" (no cap)"));
    }
  }
  world.barrier()->wait();
}

}  // namespace

int run_bench_collectives(bool json, long long max_bytes) {
  auto world = MpiProcessGroup::world();
  const int n = world->size();
  if (world->rank() == 0 && !json)
    fmt::print(
        "bench collectives | {} ranks | medians | bytes = the whole (unsharded) buffer | symm = "
        "shm with the buffers in symmetric memory\n"
        "{:<15} {:>6} {:>10} {:>7} {:>12} {:>10} {:>10} {:>9} {:>9}\n",
        n, "op", "dtype", "bytes", "algo", "time_us", "algbw", "busbw", "vs mpi", "vs memcpy");
  bench_link(*world, json);
  world->reserve_symmetric(size_t(max_bytes) + 64);
  const Tensor symmetric =
      world->symmetric_empty("bench.symmetric", std::max<long long>(max_bytes, 1), DType::u8);
  // BF16 all-gathers (parameters) and FP32 reduce-scatters (gradients), as FSDP uses them, and
  // FP32 all-reduces (HSDP's and DDP's gradient shards across replicas).
  for (const auto& [op, dtype] :
       {std::pair{OpType::all_gather, DType::bf16}, std::pair{OpType::reduce_scatter, DType::f32},
        std::pair{OpType::all_reduce, DType::f32}})
    for (long long bytes = 4096; bytes <= max_bytes; bytes *= 4) {
      const int64_t per_rank = bytes / int64_t(dtype_size(dtype)) / n;
      if (per_rank > 0) bench_size(*world, op, dtype, per_rank, symmetric, json);
    }
  return 0;
}

}  // namespace st
