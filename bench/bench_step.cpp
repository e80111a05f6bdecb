#include "bench/bench_step.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/cpu_features.hpp"
#include "core/memory_stats.hpp"
#include "core/ops/matmul_path.hpp"
#include "core/stats.hpp"
#include "launch/session.hpp"
#include "launch/trace_session.hpp"

namespace st {

namespace {

// Bytes sent by this network namespace's interfaces (loopback aside) so far: on an emulated
// host (launch/shardrun --nodes), what left the host over its link.
int64_t network_tx_bytes() {
  int64_t total = 0;
  std::error_code ec;
  for (const auto& dev : std::filesystem::directory_iterator("/sys/class/net", ec)) {
    if (dev.path().filename() == "lo") continue;
    std::ifstream in(dev.path() / "statistics" / "tx_bytes");
    int64_t bytes = 0;
    if (in >> bytes) total += bytes;
  }
  return total;
}

// Bytes the whole job sent between hosts during `fn`: each node's first rank counts its
// namespace's interfaces, one sum over the world.
template <class Fn>
int64_t inter_node_bytes(ProcessGroup& world, Fn&& fn) {
  const auto& nodes = world.nodes();
  const bool leader =
      std::find(nodes.begin(), nodes.end(), nodes[size_t(world.rank())]) - nodes.begin() ==
      world.rank();
  const int64_t before = leader ? network_tx_bytes() : 0;
  fn();
  Tensor sent = Tensor::empty("bench.net_bytes", {1}, DType::i64);
  sent.data<int64_t>()[0] = leader ? network_tx_bytes() - before : 0;
  world.all_reduce(sent)->wait();
  return sent.data<int64_t>()[0];
}

}  // namespace

namespace {

// Every timed step's numbers, kept for their medians.
struct StepSamples {
  std::vector<double> fwd, bwd, opt, total, exposed, tp_exposed, rank0_total, attributed;
  std::vector<double> pp_bubble;
  std::vector<std::vector<double>> by_kind = std::vector<std::vector<double>>(kOpKinds);
  double rss = 0;

  void add(const StepStats& st) {
    fwd.push_back(st.forward_ms);
    bwd.push_back(st.backward_ms);
    opt.push_back(st.optimizer_ms);
    total.push_back(st.slowest_step_ms);
    exposed.push_back(st.comm.exposed_ms);
    tp_exposed.push_back(st.comm.tp_exposed_ms);
    pp_bubble.push_back(st.pp_bubble);
    rank0_total.push_back(st.step_ms);
    double sum = 0;
    for (int k = 0; k < kOpKinds; ++k) {
      by_kind[size_t(k)].push_back(st.op_ms[size_t(k)]);
      sum += st.op_ms[size_t(k)];
    }
    attributed.push_back(sum);
    rss = std::max(rss, st.max_peak_rss_mib);
  }
};

// The result as a table: the median times, tokens/s and MFU, memory, rank 0's breakdown.
void print_step_text(const CommonOptions& options, const BenchStepOptions& bench, const Session& s,
                     const nlohmann::json& r, const OpTimes& breakdown) {
  fmt::print(
      "bench step | config {} | {} | {} rank{} x {} threads | medians of {} steps | cpu: {} | "
      "bf16 matmul: {} | fp32 matmul: {}\n",
      options.config, r["param_dtype"].get<std::string>(), s.ranks.size(),
      s.ranks.size() == 1 ? "" : "s", s.threads, bench.steps, r["cpu"].get<std::string>(),
      r["bf16_matmul"].get<std::string>(), r["fp32_matmul"].get<std::string>());
  fmt::print(
      "  forward   {:8.2f} ms\n  backward  {:8.2f} ms\n  optimizer {:8.2f} ms\n"
      "  step      {:8.2f} ms (slowest rank; communication exposed {:.2f} ms{})\n",
      r["fwd_ms"].get<double>(), r["bwd_ms"].get<double>(), r["opt_ms"].get<double>(),
      r["step_ms"].get<double>(), r["exposed_comm_ms"].get<double>(),
      r["exposed_tp_ms"].get<double>() > 0
          ? fmt::format(", tensor parallelism's {:.2f} ms", r["exposed_tp_ms"].get<double>())
          : std::string());
  fmt::print(
      "  tokens/s  {:8.0f}\n  achieved  {:8.1f} GFLOP/s of a {:.1f} GFLOP/s {} matmul peak "
      "({}): MFU {}\n  memory    {:8.1f} MiB peak RSS (largest "
      "rank) vs a budget of {:.1f} MiB\n",
      r["tokens_per_s"].get<double>(), r["gflops"].get<double>(), s.peak_gflops,
      dtype_name(s.peak_dtype), s.peak_source, mfu_text(r["mfu"].get<double>()),
      r["peak_rss_mib"].get<double>(), r["budget_mib"].get<double>());
  const double rank0_ms = r["rank0_step_ms"].get<double>();
  fmt::print("  rank 0's step by kind of work (medians):\n");
  for (int k = 0; k < kOpKinds; ++k)
    if (breakdown[size_t(k)] > 0.005 || OpKind(k) == OpKind::other)
      fmt::print("    {:<16} {:8.2f} ms {:5.1f}%\n", op_kind_name(OpKind(k)), breakdown[size_t(k)],
                 100 * breakdown[size_t(k)] / rank0_ms);
  fmt::print("    {:<16} {:8.2f} ms (each step's kinds summed) of a {:.2f} ms step\n", "sum",
             r["breakdown_sum_ms"].get<double>(), rank0_ms);
}

}  // namespace

int run_bench_step(const CommonOptions& options, const BenchStepOptions& bench) {
  if (bench.steps < 1 || bench.warmup < 0)
    fail_input("bench step: --steps must be >= 1 and --warmup >= 0");
  Session s =
      open_session(options, [&](Config& c) { c.training.max_steps = bench.warmup + bench.steps; });
  return run_after_startup([&] {
    // The services `train` runs beside its loop (the heartbeat; the watchdog comes with the
    // collectives): a benchmark measures the program users run.
    s.start_services();
    for (int i = 0; i < bench.warmup; ++i) s.trainer->step(i);
    TraceSession trace(*s.ranks.group, s.config.metrics.trace, s.config.metrics.trace_steps);
    StepSamples m;
    const int64_t net_bytes = inter_node_bytes(*s.ranks.group, [&] {
      for (int i = 0; i < bench.steps; ++i) {
        trace.begin_step(bench.warmup + i);
        m.add(s.trainer->step(bench.warmup + i));
        trace.end_step(bench.warmup + i);
      }
    });
    trace.write();
    // Once more at the end, keeping the best: a peak read low at start-up (another process
    // busy for a moment) would otherwise inflate every MFU of the run.
    const double peak_at_start = s.peak_gflops;
    s.measure_peak();
    s.stop_services();
    if (!s.lead()) return 0;
    const Config& config = s.config;
    const double step_ms = median(m.total);
    const double tokens = double(config.training.global_batch * config.training.seq_len);
    const double tokens_per_s = tokens / (step_ms / 1e3);
    const double gflops = tokens_per_s * s.trainer->model().flops_per_token() / 1e9;
    const double budget_mib = double(s.trainer->budget().total()) / kMiB + s.baseline_rss_mib;
    const double mfu = s.mfu(tokens_per_s);
    OpTimes breakdown{};
    for (int k = 0; k < kOpKinds; ++k) breakdown[size_t(k)] = median(m.by_kind[size_t(k)]);
    const nlohmann::json result = {
        {"config", options.config},
        {"param_dtype", dtype_name(config.precision.param_dtype)},
        {"ranks", s.ranks.size()},
        {"threads", s.threads},
        {"tokens_per_s", tokens_per_s},
        {"gflops", gflops},
        {"peak_gflops", s.peak_gflops},
        {"peak_dtype", dtype_name(s.peak_dtype)},
        {"bf16_matmul", bf16_matmul_path_name(active_bf16_matmul_path())},
        {"fp32_matmul", fp32_matmul_engine_name(active_fp32_matmul_engine())},
        {"cpu", cpu_features().summary()},
        {"peak_gflops_at_start", peak_at_start},
        {"peak_shapes", s.peak_shapes},
        {"mfu", mfu},
        {"mfu_plausible", mfu_plausible(mfu)},
        // Rank 0's step by kind of work: the median of each kind, and the median over steps of
        // their sum (each step's kinds add up to that step), beside rank 0's median step.
        {"breakdown_ms", op_times_json(breakdown)},
        {"breakdown_sum_ms", median(m.attributed)},
        {"rank0_step_ms", median(m.rank0_total)},
        {"fwd_ms", median(m.fwd)},
        {"bwd_ms", median(m.bwd)},
        {"opt_ms", median(m.opt)},
        {"step_ms", step_ms},
        {"exposed_comm_ms", median(m.exposed)},
        {"exposed_tp_ms", median(m.tp_exposed)},  // 0 without parallel.tp
        {"pp_bubble", median(m.pp_bubble)},       // 0 without parallel.pp
        {"peak_rss_mib", m.rss},
        // Between hosts: sent over the network per step (TCP/IP headers
        // included), beside the summary's prediction of the payload.
        {"inter_node_mib", double(net_bytes) / bench.steps / kMiB},
        {"inter_node_mib_predicted", double(s.trainer->traffic().inter_node) / kMiB},
        {"mesh", s.trainer->mesh().describe()},
        {"activation_checkpointing",
         activation_checkpointing_name(config.sharding.activation_checkpointing)},
        {"activations_mib", double(s.trainer->budget().activations) / kMiB},
        {"budget_mib", budget_mib},
        {"services", s.service_cost.json()}};
    if (options.json)
      fmt::print("{}\n", result.dump());
    else
      print_step_text(options, bench, s, result, breakdown);
    return 0;
  });
}

}  // namespace st
