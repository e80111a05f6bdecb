#include "launch/commands.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/bf16.hpp"
#include "core/cpu_features.hpp"
#include "core/memory_stats.hpp"
#include "core/ops/matmul.hpp"
#include "launch/config.hpp"
#include "launch/peak.hpp"
#include "launch/trainer.hpp"

namespace st {
namespace {

// Threads for this process: training.threads, or the node's cores split over its ranks.
int choose_threads(const Config& config, int ranks_on_node) {
  if (config.training.threads > 0) return int(config.training.threads);
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, ranks_on_node));
}

TextDataset load_data(const Config& config) {
  if (config.data.path.empty())
    return TextDataset::builtin(config.data.val_fraction, config.training.seq_len);
  return TextDataset::from_file(config.data.path, config.data.val_fraction,
                                config.training.seq_len);
}

int64_t count_params(const Model& model) {
  int64_t n = 0;
  for (const auto& s : model.param_specs()) n += s.numel();
  return n;
}

void print_banner(const Config& config, int threads, const TextDataset& data) {
  const CpuFeatures& cpu = cpu_features();
  fmt::print("shardtrain | cpu: {} | threads: {}\n", cpu.summary(), threads);
  fmt::print("oneDNN {} | bf16 matmul: {} | bf16 conversion: {}\n", onednn_version(),
             onednn_bf16_matmul_impl(), bf16_kernel_name(active_bf16_kernel()));
  if (!cpu.avx512_bf16 && config.precision.param_dtype == DType::bf16)
    fmt::print(
        "note: this CPU has no AVX512-BF16; BF16 matmuls run on oneDNN's fallback "
        "(correct, slower)\n");
  fmt::print("model: L={} C={} H={} T={} V={} | precision: param {} reduce {} output {}\n",
             config.model.n_layer, config.model.n_embd, config.model.n_head,
             config.model.block_size, config.model.vocab_size,
             dtype_name(config.precision.param_dtype), dtype_name(config.precision.reduce_dtype),
             dtype_name(config.precision.output_dtype));
  fmt::print("data: {} ({} train / {} val tokens)\n", data.source(), data.train().size(),
             data.val().size());
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int run_train(const CommonOptions& options) {
  const Config config = load_config(options.config, options.overrides);
  const TextDataset data = load_data(config);
  const int threads = choose_threads(config, 1);
  omp_set_num_threads(threads);
  std::ofstream metrics;
  if (!config.metrics.file.empty()) {
    metrics.open(config.metrics.file, std::ios::trunc);
    if (!metrics) fail_input("metrics.file: cannot write '{}'", config.metrics.file);
  }
  if (!options.json) print_banner(config, threads, data);
  LocalTrainer trainer(config, data);
  const double peak = measure_matmul_peak_gflops(config.precision.param_dtype, 2048, 3);
  const double flops_per_token = trainer.model().flops_per_token();
  if (!options.json)
    fmt::print("parameters: {} | matmul peak ({}): {:.0f} GFLOP/s\n", count_params(trainer.model()),
               dtype_name(config.precision.param_dtype), peak);

  for (int64_t step = 0; step < config.training.max_steps; ++step) {
    const StepStats s = trainer.step(step);
    const double tokens_per_s = double(s.tokens) / (s.step_ms / 1e3);
    const double mfu = tokens_per_s * flops_per_token / (peak * 1e9);
    nlohmann::json line = {{"step", s.step},
                           {"loss", s.loss},
                           {"lr", s.lr},
                           {"grad_norm", s.grad_norm},
                           {"tokens_per_s", tokens_per_s},
                           {"mfu", mfu},
                           {"step_ms", s.step_ms},
                           {"exposed_comm_ms", 0.0},
                           {"peak_rss_mib", peak_rss_mib()}};
    if (metrics.is_open()) metrics << line.dump() << '\n' << std::flush;
    if (options.json) {
      fmt::print("{}\n", line.dump());
    } else {
      fmt::print(
          "step {:>5}/{} | loss {:.4f} | lr {:.2e} | norm {:.3f} | {:>7.0f} tok/s | "
          "mfu {:4.1f}% | {:.1f} ms\n",
          s.step + 1, config.training.max_steps, s.loss, s.lr, s.grad_norm, tokens_per_s, 100 * mfu,
          s.step_ms);
    }
    std::fflush(stdout);
  }
  const double val = trainer.evaluate(64);
  if (options.json)
    fmt::print("{}\n", nlohmann::json{{"val_loss", val}}.dump());
  else
    fmt::print("validation loss: {:.4f}\n", val);
  return 0;
}

int run_bench_step(const CommonOptions& options, const BenchStepOptions& bench) {
  if (bench.steps < 1 || bench.warmup < 0)
    fail_input("bench step: --steps must be >= 1 and --warmup >= 0");
  Config config = load_config(options.config, options.overrides);
  config.training.max_steps = bench.warmup + bench.steps;
  const TextDataset data = load_data(config);
  const int threads = choose_threads(config, 1);
  omp_set_num_threads(threads);
  LocalTrainer trainer(config, data);
  for (int i = 0; i < bench.warmup; ++i) trainer.step(i);
  std::vector<double> fwd, bwd, opt, total;
  for (int i = 0; i < bench.steps; ++i) {
    const StepStats s = trainer.step(bench.warmup + i);
    fwd.push_back(s.forward_ms);
    bwd.push_back(s.backward_ms);
    opt.push_back(s.optimizer_ms);
    total.push_back(s.step_ms);
  }
  const double peak = measure_matmul_peak_gflops(config.precision.param_dtype, 2048, 7);
  const double step_ms = median(total);
  const double tokens = double(config.training.global_batch * config.training.seq_len);
  const double tokens_per_s = tokens / (step_ms / 1e3);
  const double gflops = tokens_per_s * trainer.model().flops_per_token() / 1e9;
  nlohmann::json result = {{"config", options.config},
                           {"param_dtype", dtype_name(config.precision.param_dtype)},
                           {"ranks", 1},
                           {"threads", threads},
                           {"tokens_per_s", tokens_per_s},
                           {"gflops", gflops},
                           {"peak_gflops", peak},
                           {"mfu", gflops / peak},
                           {"fwd_ms", median(fwd)},
                           {"bwd_ms", median(bwd)},
                           {"opt_ms", median(opt)},
                           {"step_ms", step_ms}};
  if (options.json) {
    fmt::print("{}\n", result.dump());
  } else {
    fmt::print("bench step | config {} | {} | {} rank x {} threads | medians of {} steps\n",
               options.config, dtype_name(config.precision.param_dtype), 1, threads, bench.steps);
    fmt::print(
        "  forward   {:8.2f} ms\n  backward  {:8.2f} ms\n  optimizer {:8.2f} ms\n"
        "  step      {:8.2f} ms\n",
        median(fwd), median(bwd), median(opt), step_ms);
    fmt::print(
        "  tokens/s  {:8.0f}\n  achieved  {:8.1f} GFLOP/s of a {:.1f} GFLOP/s matmul peak "
        "(MFU {:.1f}%)\n",
        tokens_per_s, gflops, peak, 100 * gflops / peak);
  }
  return 0;
}

}  // namespace st
