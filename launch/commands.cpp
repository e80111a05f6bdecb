#include "launch/commands.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/memory_stats.hpp"
#include "core/progress.hpp"
#include "core/timer.hpp"
#include "launch/session.hpp"
#include "launch/trace_session.hpp"

namespace st {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

nlohmann::json step_json(Session& s, const StepStats& st) {
  const double tokens_per_s = double(st.tokens) / (st.slowest_step_ms / 1e3);
  const double mfu = tokens_per_s * s.trainer->model().flops_per_token() / (s.peak_gflops * 1e9);
  return {{"step", st.step},
          {"loss", st.loss},
          {"lr", st.lr},
          {"grad_norm", st.grad_norm},
          {"tokens_per_s", tokens_per_s},
          {"mfu", mfu},
          {"step_ms", st.slowest_step_ms},
          {"exposed_comm_ms", st.exposed_comm_ms},
          {"peak_rss_mib", st.max_peak_rss_mib},
          {"budget_mib", double(s.trainer->budget().total()) / kMiB + s.baseline_rss_mib},
          {"tracked_mib", double(tensor_memory().peak_bytes) / kMiB},
          // Rank 0's own bytes by kind (the unsharded buffers' peak within this step).
          {"shards_mib", double(s.trainer->fsdp().memory().shard_bytes) / kMiB},
          {"optimizer_mib", double(s.trainer->optimizer_state_bytes()) / kMiB},
          {"unsharded_peak_mib", double(s.trainer->fsdp().memory().unsharded_peak_bytes) / kMiB},
          {"activations_mib", double(s.trainer->budget().activations) / kMiB},
          {"gathered_mib", double(st.gathered_bytes) / kMiB},
          {"scattered_mib", double(st.scattered_bytes) / kMiB},
          {"collective_ms", st.collective_ms},
          // Bus bandwidth of this rank's all-gathers and reduce-scatters while they ran.
          {"bus_gbps", st.collective_ms > 0 ? double(st.gathered_bytes + st.scattered_bytes) *
                                                  double(s.ranks.size() - 1) /
                                                  double(s.ranks.size()) / (st.collective_ms * 1e6)
                                            : 0.0},
          {"rank0_step_ms", st.step_ms},
          {"rank_step_ms", st.rank_step_ms},
          {"rank_peak_rss_mib", st.rank_peak_rss_mib},
          {"tokens_per_step", st.tokens},
          {"ranks", s.ranks.size()}};
}

}  // namespace

int run_train(const CommonOptions& options) {
  Session s = open_session(options);
  std::ofstream metrics;
  agree_on_startup(*s.ranks.group, [&] {
    if (s.lead() && !s.config.metrics.file.empty()) {
      metrics.open(s.config.metrics.file, std::ios::trunc);
      if (!metrics) fail_input("metrics.file: cannot write '{}'", s.config.metrics.file);
    }
  });
  if (!options.json) print_summary(s);
  const auto& ckpt = s.config.checkpoint;
  int64_t start = 0;
  agree_on_startup(*s.ranks.group, [&] {
    std::string from;
    if (ckpt.resume == "auto")
      from = latest_checkpoint(ckpt.dir);
    else if (ckpt.resume != "never")
      from = ckpt.resume;
    if (from.empty()) return;
    Progress progress("checkpoint", 0, s.lead());
    progress.update(0, "verifying and loading " + from);
    start = s.trainer->load_checkpoint(from);
    progress.finish(fmt::format("resumed from {} after step {}", from, start));
  });
  const int64_t max_steps = s.config.training.max_steps;
  TraceSession trace(*s.ranks.group, s.config.metrics.trace, s.config.metrics.trace_steps);
  Timer run_clock;
  auto save = [&](int64_t steps_done) {
    Progress progress("checkpoint", 0, s.lead());
    progress.update(0, fmt::format("saving step {} to {}", steps_done, ckpt.dir));
    const std::string path = s.trainer->save_checkpoint(steps_done);
    progress.finish("saved " + path);
  };
  // With --json, stdout carries only JSON; the progress line goes to stderr.
  Progress step_progress("train", long(max_steps - start), s.lead() && options.json);
  for (int64_t step = start; step < max_steps; ++step) {
    trace.begin_step(step);
    const StepStats st = s.trainer->step(step);
    trace.end_step(step);
    const bool save_now =
        !ckpt.dir.empty() && ckpt.every > 0 && (step + 1) % ckpt.every == 0 && step + 1 < max_steps;
    if (!s.lead()) {
      if (save_now) save(step + 1);
      continue;
    }
    const nlohmann::json line = step_json(s, st);
    if (metrics.is_open()) metrics << line.dump() << '\n' << std::flush;
    if (options.json) {
      fmt::print("{}\n", line.dump());
      step_progress.update(long(step + 1 - start), fmt::format("loss {:.4f}", st.loss));
    } else {
      fmt::print(
          "step {:>5}/{} | loss {:.4f} | lr {:.2e} | norm {:.3f} | {:>7.0f} tok/s | mfu {:4.1f}% "
          "| {:.1f} ms (comm exposed {:.1f}) | rss {:.0f} MiB | eta {}\n",
          st.step + 1, max_steps, st.loss, st.lr, st.grad_norm, line["tokens_per_s"].get<double>(),
          100 * line["mfu"].get<double>(), st.slowest_step_ms, st.exposed_comm_ms,
          st.max_peak_rss_mib,
          format_duration(run_clock.seconds() / double(step + 1 - start) *
                          double(max_steps - step - 1)));
    }
    std::fflush(stdout);
    if (save_now) save(step + 1);
  }
  if (!ckpt.dir.empty() && start < max_steps) save(max_steps);
  if (trace.enabled()) {
    const int64_t spans = trace.write();
    if (s.lead() && !options.json)
      fmt::print("trace: {} ({} spans; open in https://ui.perfetto.dev or chrome://tracing)\n",
                 s.config.metrics.trace, spans);
  }
  const double val = s.trainer->evaluate(64);
  if (s.lead()) {
    if (options.json)
      fmt::print("{}\n", nlohmann::json{{"val_loss", val}}.dump());
    else
      fmt::print("validation loss: {:.4f}\n", val);
  }
  return 0;
}

int run_bench_step(const CommonOptions& options, const BenchStepOptions& bench) {
  if (bench.steps < 1 || bench.warmup < 0)
    fail_input("bench step: --steps must be >= 1 and --warmup >= 0");
  Session s =
      open_session(options, [&](Config& c) { c.training.max_steps = bench.warmup + bench.steps; });
  for (int i = 0; i < bench.warmup; ++i) s.trainer->step(i);
  TraceSession trace(*s.ranks.group, s.config.metrics.trace, s.config.metrics.trace_steps);
  std::vector<double> fwd, bwd, opt, total, exposed;
  double rss = 0;
  for (int i = 0; i < bench.steps; ++i) {
    trace.begin_step(bench.warmup + i);
    const StepStats st = s.trainer->step(bench.warmup + i);
    trace.end_step(bench.warmup + i);
    fwd.push_back(st.forward_ms);
    bwd.push_back(st.backward_ms);
    opt.push_back(st.optimizer_ms);
    total.push_back(st.slowest_step_ms);
    exposed.push_back(st.exposed_comm_ms);
    rss = std::max(rss, st.max_peak_rss_mib);
  }
  trace.write();
  if (!s.lead()) return 0;
  const Config& config = s.config;
  const double step_ms = median(total);
  const double tokens = double(config.training.global_batch * config.training.seq_len);
  const double tokens_per_s = tokens / (step_ms / 1e3);
  const double gflops = tokens_per_s * s.trainer->model().flops_per_token() / 1e9;
  const double budget_mib = double(s.trainer->budget().total()) / kMiB + s.baseline_rss_mib;
  nlohmann::json result = {{"config", options.config},
                           {"param_dtype", dtype_name(config.precision.param_dtype)},
                           {"ranks", s.ranks.size()},
                           {"threads", s.threads},
                           {"tokens_per_s", tokens_per_s},
                           {"gflops", gflops},
                           {"peak_gflops", s.peak_gflops},
                           {"mfu", gflops / s.peak_gflops},
                           {"fwd_ms", median(fwd)},
                           {"bwd_ms", median(bwd)},
                           {"opt_ms", median(opt)},
                           {"step_ms", step_ms},
                           {"exposed_comm_ms", median(exposed)},
                           {"peak_rss_mib", rss},
                           {"budget_mib", budget_mib}};
  if (options.json) {
    fmt::print("{}\n", result.dump());
  } else {
    fmt::print("bench step | config {} | {} | {} rank{} x {} threads | medians of {} steps\n",
               options.config, dtype_name(config.precision.param_dtype), s.ranks.size(),
               s.ranks.size() == 1 ? "" : "s", s.threads, bench.steps);
    fmt::print(
        "  forward   {:8.2f} ms\n  backward  {:8.2f} ms\n  optimizer {:8.2f} ms\n"
        "  step      {:8.2f} ms (slowest rank; communication exposed {:.2f} ms)\n",
        median(fwd), median(bwd), median(opt), step_ms, median(exposed));
    fmt::print(
        "  tokens/s  {:8.0f}\n  achieved  {:8.1f} GFLOP/s of a {:.1f} GFLOP/s matmul peak "
        "(MFU {:.1f}%)\n  memory    {:8.1f} MiB peak RSS (largest rank) vs a budget of {:.1f} "
        "MiB\n",
        tokens_per_s, gflops, s.peak_gflops, 100 * gflops / s.peak_gflops, rss, budget_mib);
  }
  return 0;
}

}  // namespace st
