#include "bench/bench_collectives.hpp"

#include <fmt/format.h>

#include <algorithm>
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
  CollectiveOptions max;
  max.op = ReduceOp::max;
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

int run_bench_collectives(bool json, long long max_bytes) {
  auto world = MpiProcessGroup::world();
  ProcessGroup& g = *world;
  const int n = g.size();
  const bool print = g.rank() == 0;
  if (print && !json)
    fmt::print(
        "bench collectives | {} ranks | medians | bytes = the whole (unsharded) buffer\n"
        "{:<15} {:>6} {:>10} {:>7} {:>12} {:>10} {:>10} {:>9}\n",
        n, "op", "dtype", "bytes", "algo", "time_us", "algbw", "busbw", "vs mpi");
  for (const char* op : {"all_gather", "reduce_scatter"}) {
    const DType dtype = std::string(op) == "all_gather" ? DType::bf16 : DType::f32;
    for (long long bytes = 4096; bytes <= max_bytes; bytes *= 4) {
      const int64_t total = bytes / int64_t(dtype_size(dtype));
      const int64_t per_rank = total / n;
      if (per_rank == 0) continue;
      const int64_t used = per_rank * n;
      const int repeats = int(std::clamp<long long>((256ll << 20) / bytes, 11, 50));
      Tensor full = Tensor::zeros("bench.full", {used}, dtype);
      Tensor shard =
          Tensor::zeros("bench.shard", {per_rank}, dtype == DType::bf16 ? DType::bf16 : DType::f32);
      Tensor copy = Tensor::zeros("bench.copy", {used}, dtype);
      double mpi_us = 0;
      for (Algorithm a : {Algorithm::mpi, Algorithm::ring, Algorithm::shm, Algorithm::automatic}) {
        if (a == Algorithm::shm && !world->single_node()) continue;
        CollectiveOptions o;
        o.algorithm = a;
        const double us = time_us(g, repeats, [&] {
          if (dtype == DType::bf16)
            g.all_gather(shard, full, o)->wait();
          else
            g.reduce_scatter(full, shard, o)->wait();
        });
        if (a == Algorithm::mpi) mpi_us = us;
        const std::string name =
            a == Algorithm::automatic
                ? fmt::format("auto:{}", algorithm_name(g.choose(op, size_t(bytes))))
                : algorithm_name(a);
        const double algbw = double(used * dtype_size(dtype)) / (us * 1e-6) / 1e9;
        const double busbw = algbw * double(n - 1) / double(n);
        if (!print) continue;
        if (json)
          fmt::print(
              "{}\n",
              nlohmann::json{
                  {"op", op},
                  {"dtype", dtype_name(dtype)},
                  {"algorithm", a == Algorithm::automatic ? "auto" : algorithm_name(a)},
                  {"chosen",
                   algorithm_name(a == Algorithm::automatic ? g.choose(op, size_t(bytes)) : a)},
                  {"bytes", used * int64_t(dtype_size(dtype))},
                  {"ranks", n},
                  {"time_us", us},
                  {"algbw_gbps", algbw},
                  {"busbw_gbps", busbw}}
                  .dump());
        else
          fmt::print("{:<15} {:>6} {:>10} {:>7} {:>12.1f} {:>10.2f} {:>10.2f} {:>8.1f}x\n", op,
                     dtype_name(dtype), used * int64_t(dtype_size(dtype)), name, us, algbw, busbw,
                     mpi_us / us);
      }
      // The limit: copying the same bytes once in this process.
      const double memcpy_us =
          time_us(g, repeats, [&] { std::memcpy(copy.raw(), full.raw(), full.nbytes()); });
      const double algbw = double(full.nbytes()) / (memcpy_us * 1e-6) / 1e9;
      if (print && json)
        fmt::print("{}\n", nlohmann::json{{"op", op},
                                          {"dtype", dtype_name(dtype)},
                                          {"algorithm", "memcpy"},
                                          {"bytes", full.nbytes()},
                                          {"ranks", n},
                                          {"time_us", memcpy_us},
                                          {"algbw_gbps", algbw},
                                          {"busbw_gbps", algbw}}
                               .dump());
      else if (print)
        fmt::print("{:<15} {:>6} {:>10} {:>7} {:>12.1f} {:>10.2f} {:>10} {:>8.1f}x\n", op,
                   dtype_name(dtype), full.nbytes(), "memcpy", memcpy_us, algbw, "-",
                   mpi_us / memcpy_us);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace st
