#include "bench/calibrate.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <thread>

#include "bench/subprocess.hpp"
#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/json_parse.hpp"
#include "core/ops/matmul_path.hpp"
#include "core/staged_output.hpp"
#include "core/stats.hpp"
#include "launch/config.hpp"
#include "launch/model_factory.hpp"
#include "launch/simulate_command.hpp"
#include "simulate/profile.hpp"

namespace st {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Span {
  std::string name;
  double begin, end;  // s
};

// Rank 0's compute-track spans (units, steps, optimizer, and "wait: ..." on collectives).
std::vector<Span> compute_spans(const std::string& trace_path) {
  const json trace = parse_json_object(read_text_file(trace_path), trace_path);
  std::vector<Span> spans;
  for (const json& e : trace.at("traceEvents"))
    if (e.value("ph", "") == "X" && e.value("pid", -1) == 0 && e.value("tid", -1) == 0)
      spans.push_back({e.at("name").get<std::string>(), e.at("ts").get<double>() / 1e6,
                       (e.at("ts").get<double>() + e.at("dur").get<double>()) / 1e6});
  return spans;
}

// One step's micro-batch segments from its spans (PhaseClock's "forward NAME" / "backward
// NAME" per unit, the root's spanning the blocks'), in the profile's layout. Every segment runs
// from one hook to the next (a block's includes the hooks after it) less the waits on
// collectives inside it: those are the simulator's to predict.
ComputeSample segments(const std::vector<Span>& all, const Span& step, int64_t L) {
  std::vector<const Span*> fwd, bwd, waits;
  const Span *froot = nullptr, *broot = nullptr, *opt = nullptr;
  for (const Span& s : all) {
    if (s.begin < step.begin || s.end > step.end) continue;
    if (s.name == "forward root")
      froot = &s;
    else if (s.name == "backward root")
      broot = &s;
    else if (s.name.starts_with("forward "))
      fwd.push_back(&s);
    else if (s.name.starts_with("backward "))
      bwd.push_back(&s);
    else if (s.name.starts_with("optimizer"))
      opt = &s;
    else if (s.name.starts_with("wait: "))
      waits.push_back(&s);
  }
  if (!froot || !broot || !opt || int64_t(fwd.size()) != L || int64_t(bwd.size()) != L)
    fail("the trace of '{}' lacks the unit spans calibrate needs ({} forward, {} backward)",
         step.name, fwd.size(), bwd.size());
  auto compute = [&](double a, double b) {
    double t = b - a;
    for (const Span* w : waits) t -= std::max(0.0, std::min(b, w->end) - std::max(a, w->begin));
    return std::max(0.0, t);
  };
  auto by_begin = [](const Span* a, const Span* b) { return a->begin < b->begin; };
  std::sort(fwd.begin(), fwd.end(), by_begin);
  std::sort(bwd.begin(), bwd.end(), by_begin);
  ComputeSample c;
  c.block_forward.resize(size_t(L));
  c.block_backward.resize(size_t(L));
  c.root_forward_pre = compute(froot->begin, fwd[0]->begin);
  for (int64_t k = 0; k < L; ++k)
    c.block_forward[size_t(k)] =
        compute(fwd[size_t(k)]->begin, k + 1 < L ? fwd[size_t(k + 1)]->begin : fwd[size_t(k)]->end);
  c.root_forward_post = compute(fwd.back()->end, froot->end);
  // The hooks between the passes (the root's gradient buffer) count with the head's backward.
  c.root_backward_pre = compute(froot->end, bwd[0]->begin);
  for (int64_t k = 0; k < L; ++k)  // bwd[0] is the last block
    c.block_backward[size_t(L - 1 - k)] =
        compute(bwd[size_t(k)]->begin, k + 1 < L ? bwd[size_t(k + 1)]->begin : bwd[size_t(k)]->end);
  c.root_backward_post = compute(bwd.back()->end, broot->end);
  // The rest of the step (the batch, the last reductions' bookkeeping), waits excluded.
  c.step_overhead = compute(step.begin, froot->begin) + compute(broot->end, opt->begin) +
                    compute(opt->end, step.end);
  c.optimizer_per_element = opt->end - opt->begin;  // divided by the elements later
  return c;
}

ComputeSample median_sample(const std::vector<ComputeSample>& xs) {
  auto med = [&](auto get) {
    std::vector<double> v;
    for (const ComputeSample& x : xs) v.push_back(get(x));
    return median(v);
  };
  ComputeSample m = xs.front();
  m.root_forward_pre = med([](const ComputeSample& x) { return x.root_forward_pre; });
  m.root_forward_post = med([](const ComputeSample& x) { return x.root_forward_post; });
  m.root_backward_pre = med([](const ComputeSample& x) { return x.root_backward_pre; });
  m.root_backward_post = med([](const ComputeSample& x) { return x.root_backward_post; });
  m.step_overhead = med([](const ComputeSample& x) { return x.step_overhead; });
  m.optimizer_per_element = med([](const ComputeSample& x) { return x.optimizer_per_element; });
  for (size_t k = 0; k < m.block_forward.size(); ++k) {
    m.block_forward[k] = med([k](const ComputeSample& x) { return x.block_forward[k]; });
    m.block_backward[k] = med([k](const ComputeSample& x) { return x.block_backward[k]; });
  }
  return m;
}

std::string overrides_text(const std::vector<std::string>& overrides) {
  std::string out;
  for (const std::string& o : overrides) {
    out.push_back(' ');
    out.append(quote(o));
  }
  return out;
}

// Fits a link class from `bench collectives --json` rows of `algorithm`; the window's cost is
// per operation (1 step, n bytes at 2 ranks), a ring's per step.
LinkFit fit_link(const std::vector<json>& rows, const std::string& algorithm, int ranks) {
  std::map<std::string, std::vector<TimingSample>> by_op;
  for (const json& r : rows) {
    if (r.value("algorithm", "") != algorithm || !r.contains("time_us")) continue;
    const double n = r.at("bytes").get<double>(), p = r.at("ranks").get<double>();
    const double t = r.at("time_us").get<double>() / 1e6;
    if (algorithm == "shm")
      by_op[r.at("op")].push_back({1, n * 2 * (p - 1) / p, t});
    else
      by_op[r.at("op")].push_back({p - 1, n * (p - 1) / p, t});
  }
  if (by_op["all_gather"].size() < 2 || by_op["reduce_scatter"].size() < 2)
    fail("bench collectives printed too few '{}' rows to fit", algorithm);
  LinkFit fit{
      ranks, fit_alpha_beta(by_op["all_gather"]), fit_alpha_beta(by_op["reduce_scatter"]), {}};
  // MPI's all-reduce, per step of a ring's 2(p - 1), from 64 KiB (below, the engine runs
  // recursive doubling as Open MPI does): what a ring of this link's steps would take, plus
  // whatever MPI's own algorithm adds.
  std::vector<TimingSample> all_reduce;
  for (const json& r : rows)
    if (r.value("op", "") == "all_reduce" && r.value("bytes", 0.0) >= 65536) {
      const double n = r.at("bytes").get<double>(), p = r.at("ranks").get<double>();
      all_reduce.push_back({2 * (p - 1), 2 * n * (p - 1) / p, r.at("time_us").get<double>() / 1e6});
    }
  if (all_reduce.size() >= 2) fit.all_reduce = fit_alpha_beta(all_reduce);
  return fit;
}

}  // namespace

namespace {

// Where calibrate's subprocesses come from: this binary and launch/shardrun.
struct Programs {
  std::string exe, shardrun;
};

// A compute sample per --ranks and --rows that fit the batch: `bench step` with a trace, cut
// into the parts of a micro-batch; `elements` is the model's parameter count.
void measure_compute(const CalibrateOptions& o, const Config& config, const Programs& run,
                     const fs::path& scratch, double elements, CalibrationProfile& p) {
  const fs::path exe = run.exe;
  const std::string& shardrun = run.shardrun;
  const int cores = p.cores;
  for (int ranks : o.ranks) {
    if (ranks < 1) fail_input("simulate calibrate: --ranks {} must be >= 1", ranks);
    const int threads = std::max(1, cores / ranks);  // the runtime's rule for training.threads
    for (int rows : o.rows) {
      if (rows < 1 || rows * ranks > config.training.global_batch) continue;
      const fs::path trace = scratch / fmt::format("r{}rows{}.json", ranks, rows);
      const std::string command = fmt::format(
          "{} -n {} {} bench step --json --config {} --warmup 1 --steps {}{} "
          "training.global_batch={} training.micro_batches=1 training.threads={} metrics.trace={} "
          "2>/dev/null",
          quote(shardrun), ranks, quote(exe.string()), quote(o.common.config), o.steps,
          overrides_text(o.common.overrides), rows * ranks, threads, quote(trace.string()));
      fmt::print(stderr, "calibrate: compute at {} rows x {} thread(s), {} rank(s) at once\n", rows,
                 threads, ranks);
      const json bench = run_for_json(command);
      const std::vector<Span> spans = compute_spans(trace.string());
      std::vector<ComputeSample> steps;
      for (const Span& s : spans)
        if (s.name.starts_with("step ")) steps.push_back(segments(spans, s, config.model.n_layer));
      if (steps.empty()) fail("the trace of '{}' has no steps", command);
      ComputeSample c = median_sample(steps);
      c.ranks = ranks;
      c.threads = threads;
      c.rows = rows;
      // Each rank's optimizer runs over its shard.
      c.optimizer_per_element /= elements / ranks;
      const json& kinds = bench.at("breakdown_ms");
      const double unit_ms = bench.at("fwd_ms").get<double>() + bench.at("bwd_ms").get<double>();
      c.matmul_share = std::clamp(kinds.value("matmul", 0.0) / unit_ms, 0.05, 0.95);
      p.compute.push_back(c);
      if (ranks == 1)
        p.matmul_peak[threads] =
            std::max(p.matmul_peak[threads], bench.at("peak_gflops").get<double>() * 1e9);
    }
  }
}

// The α-β fits of the collectives (or a profile's, --links-from) and memcpy's bandwidth.
void measure_links(const CalibrateOptions& o, const Programs& run, CalibrationProfile& p) {
  const fs::path exe = run.exe;
  const std::string& shardrun = run.shardrun;
  // Collectives over shared memory (the window and a ring), then TCP between emulated hosts,
  // each at 2 ranks and at 4 (oversubscribed here: their α is the scheduler's, not the link's).
  const std::string bench_collectives =
      fmt::format("{} bench collectives --json --max-bytes {}", quote(exe.string()), o.max_bytes);
  if (!o.links_from.empty()) {  // links do not depend on the model: reuse a profile's
    const CalibrationProfile other = read_profile(o.links_from);
    p.links = other.links;
    p.memcpy_bandwidth = other.memcpy_bandwidth;
  }
  for (int ranks : o.links_from.empty() ? o.link_ranks : std::vector<int>{}) {
    fmt::print(stderr, "calibrate: collectives over shared memory, {} ranks\n", ranks);
    const std::vector<json> shm = run_for_json_lines(
        fmt::format("{} -n {} {} 2>/dev/null", quote(shardrun), ranks, bench_collectives));
    p.links["shm"].push_back(fit_link(shm, "shm", ranks));
    p.links["ring-shm"].push_back(fit_link(shm, "ring", ranks));
    for (const json& r : shm)
      if (r.value("algorithm", "") == "memcpy" && r.value("bytes", 0.0) >= 1 << 20)
        p.memcpy_bandwidth = std::max(
            p.memcpy_bandwidth, r["bytes"].get<double>() / (r["time_us"].get<double>() / 1e6));
  }
  if (!(p.memcpy_bandwidth > 0)) p.memcpy_bandwidth = 1e10;
  if (o.tcp && o.links_from.empty()) {
    std::vector<double> caps = {0};
    caps.insert(caps.end(), o.link_gbit.begin(), o.link_gbit.end());
    for (double cap : caps)
      for (int ranks : o.link_ranks) {
        const std::string name = cap > 0 ? fmt::format("tcp-{:g}gbit", cap) : "tcp";
        fmt::print(stderr, "calibrate: collectives over {}, {} ranks on 2 hosts\n", name, ranks);
        const std::vector<json> tcp = run_for_json_lines(fmt::format(
            "{} -n {} --nodes 2 {} {} 2>/dev/null", quote(shardrun), ranks,
            cap > 0 ? fmt::format("--link-gbit {:g}", cap) : std::string(), bench_collectives));
        p.links[name].push_back(fit_link(tcp, "ring", ranks));
      }
  }
}

// "shm@2 α=..us β=..ns/B, ...": the fits calibrate wrote.
std::string link_summary(const CalibrationProfile& p) {
  std::vector<std::string> names;
  for (const auto& [name, fits] : p.links)
    for (const LinkFit& fit : fits)
      names.push_back(fmt::format("{}@{} α={:.1f}us β={:.3f}ns/B", name, fit.ranks,
                                  fit.all_gather.alpha * 1e6, fit.all_gather.beta * 1e9));
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

int run_calibrate(const CalibrateOptions& o) {
  if (o.out.empty()) fail_input("simulate calibrate: --out FILE.json is required");
  if (const fs::path dir = fs::path(o.out).parent_path(); !dir.empty()) {
    std::error_code ec;
    fs::create_directories(dir, ec);  // e.g. the per-machine cache `simulate` names
  }
  StagedOutput(o.out, "simulate calibrate --out").check_writable();  // before minutes of work
  if (o.steps < 1) fail_input("simulate calibrate: --steps must be >= 1");
  const Config config = load_config(o.common.config, o.common.overrides);
  const Programs run{this_executable(), find_shardrun().string()};
  const fs::path scratch =
      fs::temp_directory_path() / fmt::format("shardtrain-calibrate-{}", getpid());
  fs::create_directories(scratch);
  // The traces go with the process, however it ends here.
  const std::unique_ptr<const fs::path, void (*)(const fs::path*)> remove_scratch(
      &scratch, [](const fs::path* dir) {
        std::error_code ec;
        fs::remove_all(*dir, ec);
      });
  CalibrationProfile p;
  p.machine =
      fmt::format("{} cores, {}", std::thread::hardware_concurrency(), cpu_features().summary());
  p.model = profiled_model_of(config);  // any family: the profile names it and its keys
  apply_matmul_settings(config);
  const std::unique_ptr<Model> model = make_model(config);
  p.cpu = cpu_features().brand;
  p.cpu_features = cpu_features().summary();
  p.matmul = matmul_identity(config.precision.param_dtype);
  p.cores = int(std::max(1u, std::thread::hardware_concurrency()));
  double elements = 0;
  for (const ParamSpec& s : model->param_specs()) elements += double(s.numel());
  measure_compute(o, config, run, scratch, elements, p);
  if (p.compute.empty())
    fail_input("simulate calibrate: no --rows fit training.global_batch = {}",
               config.training.global_batch);
  measure_links(o, run, p);
  StagedOutput out(o.out, "simulate calibrate --out");  // never half a profile
  write_output_text(out, profile_to_json(p));
  fmt::print(o.report, "calibrate: wrote {} ({} compute samples, links: {})\n", o.out,
             p.compute.size(), link_summary(p));
  return 0;
}

}  // namespace st
