#include "launch/simulate_plan.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.hpp"
#include "launch/plot.hpp"
#include "parallel/pipeline/schedule.hpp"

namespace st {

std::string PlanLayout::label() const {
  std::vector<std::string> parts;
  if (mesh.tp > 1) parts.push_back(fmt::format("tp{}", mesh.tp));
  if (mesh.pp > 1) parts.push_back(fmt::format("pp{}", mesh.pp));
  if (data == "hsdp")
    parts.push_back(fmt::format("hsdp {}x{}", mesh.dp_shard, mesh.dp_replicate));
  else if (mesh.dp_shard * mesh.dp_replicate > 1)
    parts.push_back(fmt::format("{} {}", data, mesh.dp_shard * mesh.dp_replicate));
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : " ") + p;
  if (mesh.pp > 1) {
    out += fmt::format(" {}", pipe_schedule_name(schedule));
    if (virtual_stages > 1) out += fmt::format(" v{}", virtual_stages);
  }
  out += fmt::format(" M{} {}", micro_batches, activation_checkpointing_name(checkpointing));
  if (reshard_to > 1) out += fmt::format(" hpZ{}", reshard_to);
  if (quantization != Quantization::none)
    out += fmt::format(" {}{}", quantization_name(quantization), quantize_gathers ? "" : " reduce");
  return out;
}

std::vector<std::string> PlanLayout::overrides() const {
  std::vector<std::string> out = {
      fmt::format("parallel.dp_shard={}", mesh.dp_shard),
      fmt::format("parallel.dp_replicate={}", mesh.dp_replicate),
      fmt::format("parallel.tp={}", mesh.tp),
      fmt::format("parallel.pp={}", mesh.pp),
      fmt::format("parallel.pp_schedule={}", pipe_schedule_name(schedule)),
      fmt::format("parallel.pp_virtual_stages={}", virtual_stages),
      fmt::format("training.micro_batches={}", micro_batches),
      fmt::format("sharding.activation_checkpointing={}",
                  activation_checkpointing_name(checkpointing)),
      fmt::format("sharding.reduce_quantization={}", quantization_name(quantization)),
      fmt::format("sharding.gather_quantization={}",
                  quantization_name(quantize_gathers ? quantization : Quantization::none))};
  // Units freed after the forward (the runtime's default), or hpZ's node slice kept.
  out.push_back(reshard_to > 1 ? fmt::format("sharding.reshard_after_forward={}", reshard_to)
                               : std::string("sharding.reshard_after_forward=true"));
  return out;
}

Config PlanLayout::apply(const Config& base) const {
  Config c = base;
  for (const std::string& item : overrides()) apply_override(c, item);
  c.parallel.pp_layers.clear();  // the stages split as the runtime balances them
  return c;
}

namespace {

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

}  // namespace

std::vector<PlanLayout> plan_layouts(const Config& config, int ranks, int ranks_per_node) {
  const int node = std::min(ranks, ranks_per_node), layers = int(config.model.n_layer);
  const int64_t batch = config.training.global_batch;
  std::vector<PlanLayout> out;
  for (int tp : divisors(node)) {
    if (ranks % tp != 0) continue;
    for (int pp : divisors(ranks / tp)) {
      if (pp > layers) break;  // a stage holds a block at least
      const int dp = ranks / (tp * pp);
      if (batch % dp != 0) continue;  // the batch does not split over the data-parallel ranks
      const int rows = int(batch / dp);
      // The data-parallel split: FSDP over all, HSDP sharded within a node's data ranks, DDP.
      std::vector<std::pair<std::string, MeshShape>> data = {
          {"fsdp", {.dp_shard = dp, .tp = tp, .pp = pp}}};
      const int node_shard = std::max(1, std::min(ranks / pp, node) / tp);
      if (node_shard > 1 && node_shard < dp && dp % node_shard == 0)
        data.push_back(
            {"hsdp",
             {.dp_shard = node_shard, .dp_replicate = dp / node_shard, .tp = tp, .pp = pp}});
      if (dp > 1) data.push_back({"ddp", {.dp_shard = 1, .dp_replicate = dp, .tp = tp, .pp = pp}});
      // Schedules (GPipe never beats 1F1B: the same bubble with every micro-batch in flight).
      std::vector<std::pair<PipeSchedule, int>> schedules = {{PipeSchedule::one_f_one_b, 1}};
      if (pp > 1) {
        if (layers >= 2 * pp) schedules.push_back({PipeSchedule::interleaved_1f1b, 2});
        schedules.push_back({PipeSchedule::zero_bubble, 1});
      }
      for (const auto& [name, mesh] : data) {
        // A group crosses nodes when its ranks span more than a node (replicas are a stage's
        // whole data-parallel span apart).
        const bool shard_crosses = mesh.dp_shard * tp > node,
                   crosses_nodes = shard_crosses || (mesh.dp_replicate > 1 && ranks / pp > node);
        for (const auto& [schedule, V] : schedules) {
          for (int M : divisors(rows)) {
            // With stages: at least a micro-batch per stage (fewer leave stages idle), and
            // interleaving's groups of P. Without: the micro-batch count only trades memory for
            // repeated collectives, so every count is tried and the fewest that fits kept.
            if (pp > 1 && M < std::min(pp, rows)) continue;
            if (schedule == PipeSchedule::interleaved_1f1b && M % pp != 0) continue;
            for (const ActivationCheckpointing ac :
                 {ActivationCheckpointing::none, ActivationCheckpointing::selective,
                  ActivationCheckpointing::full}) {
              PlanLayout l{mesh, schedule, V, M, ac, 0, Quantization::none, false, name};
              out.push_back(l);
              // hpZ: a node's slice kept for the backward, when the shard group leaves the node
              // and blocks are gathered twice (stages gather each held unit once a step).
              if (pp == 1 && shard_crosses && node_shard > 1 && mesh.dp_shard % node_shard == 0) {
                PlanLayout h = l;
                h.reshard_to = node_shard;
                out.push_back(h);
              }
              // Quantized collectives where a data-parallel group crosses nodes.
              if (crosses_nodes && mesh.dp_shard * mesh.dp_replicate > 1) {
                PlanLayout q = l;
                q.quantization = Quantization::int8;
                q.quantize_gathers = shard_crosses;
                out.push_back(q);
              }
            }
          }
        }
      }
    }
  }
  return out;
}

double plan_lower_bound(const PlannedRow& row) {
  const StepPlan& plan = row.plan;
  const PlatformLinks& links = row.platform.links;
  // TP collectives block the compute thread; at best they move (p - 1) / p of their bytes (an
  // all-reduce twice) at the node's fastest per-byte rate.
  double beta = links.intra_gather.beta;
  if (links.shm_window)
    beta = std::min({beta, 2 * links.shm_gather.beta, 2 * links.shm_reduce.beta});
  const double p = plan.tp;
  auto tp_time = [&](const std::vector<TpCollective>& calls) {
    double t = 0;
    for (const TpCollective& c : calls)
      t += c.bytes * (p - 1) / p * beta * (c.op == TpOp::all_reduce ? 2 : 1);
    return plan.tp > 1 ? t : 0.0;
  };
  const TpCalls& tc = plan.tp_calls;
  const SegmentTimes& c = plan.compute;
  const double M = plan.micro_batches;
  if (plan.pipeline.ranks <= 1) {
    const double tp =
        tp_time(tc.root_forward_pre) + tp_time(tc.root_forward_post) +
        tp_time(tc.root_backward_pre) + tp_time(tc.root_backward_post) +
        double(c.block_forward.size()) * (tp_time(tc.block_forward) + tp_time(tc.block_backward));
    return plan.step_overhead + M * (c.total() + tp) + plan.optimizer;
  }
  const PipelinePlan& pipe = plan.pipeline;
  const int P = pipe.ranks;
  std::vector<double> busy(size_t(P), 0);
  // The least loaded stage's forward (compute and TP), backward compute and backward TP, each
  // minimised on its own: zero bubble's weight half is a share of the backward's compute only
  // (its TP collectives run in the input half), as the replay splits it.
  double least_forward = 1e300, least_backward = 1e300, least_backward_tp = 1e300;
  for (size_t s = 0; s < pipe.stages.size(); ++s) {
    double f = 0, b = 0, b_tp = 0;
    for (int k = pipe.stages[s].first; k < pipe.stages[s].end; ++k) {
      f += c.block_forward[size_t(k)] + tp_time(tc.block_forward);
      b += c.block_backward[size_t(k)];
      b_tp += tp_time(tc.block_backward);
    }
    least_forward = std::min(least_forward, f), least_backward = std::min(least_backward, b);
    least_backward_tp = std::min(least_backward_tp, b_tp);
    busy[s % size_t(P)] += M * (f + b + b_tp);
  }
  busy.front() += M * (c.root_forward_pre + c.root_backward_post + tp_time(tc.root_forward_pre) +
                       tp_time(tc.root_backward_post));
  busy.back() += M * (c.root_forward_post + c.root_backward_pre + tp_time(tc.root_forward_post) +
                      tp_time(tc.root_backward_pre));
  const PipelineSchedule schedule(pipe.schedule, {P, pipe.virtual_stages, plan.micro_batches});
  const double w = pipe.weight_share;
  const PipeTimeline t = simulate_pipeline(
      schedule,
      {least_forward, least_backward * (1 - w) + least_backward_tp, least_backward * w, 0});
  const double optimizer = pipe.optimizer.empty()
                               ? plan.optimizer
                               : *std::max_element(pipe.optimizer.begin(), pipe.optimizer.end());
  return plan.step_overhead + std::max(t.makespan, *std::max_element(busy.begin(), busy.end())) +
         optimizer;
}

namespace {

constexpr double kPlanGiB = 1024.0 * 1024 * 1024;

// "1.5 GiB", "3.2 MiB": bytes in the unit that keeps them readable.
std::string memory_text(double bytes) {
  return bytes >= kPlanGiB ? fmt::format("{:.1f} GiB", bytes / kPlanGiB)
                           : fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024));
}

// The budget's largest term, by the name the memory line prints.
std::string largest_term(const MemoryBudget& m) {
  const std::vector<std::pair<std::string, int64_t>> terms = {
      {"shards", m.master_and_grad},
      {"optimizer", m.optimizer_state},
      {"unsharded parameters", m.unsharded_params + m.kept_slices},
      {"unsharded gradients", m.unsharded_grads + m.quantized_buffers},
      {"activations", m.activations},
      {"workspace", m.matmul_workspace + m.checkpoint_staging}};
  return std::max_element(terms.begin(), terms.end(),
                          [](auto& a, auto& b) { return a.second < b.second; })
      ->first;
}

struct Candidate {
  PlanLayout layout;
  PlannedRow row;
  double bound = 0;
};

struct Ranked {
  PlanLayout layout;
  Prediction p;
  double bound = 0;
};

// What a step spends, as the table splits it: compute (with recomputation), the bubble's idle
// share, TP collectives and the data-parallel waits.
struct StepParts {
  double compute, bubble, tp, exposed;
};
StepParts parts_of(const SimResult& s) {
  return {s.compute, s.pp_bubble * s.step, s.tp_exposed, s.exposed};
}

// Why `a` beats `b`: the step's parts that differ by more than 1% of b's step, largest first.
std::string why_faster(const Ranked& a, const Ranked& b) {
  const StepParts x = parts_of(a.p.sim), y = parts_of(b.p.sim);
  std::vector<std::pair<double, std::string>> diffs = {
      {x.compute - y.compute, "compute"},
      {x.bubble - y.bubble, "bubble"},
      {x.tp - y.tp, "TP collectives"},
      {x.exposed - y.exposed, "exposed data-parallel communication"}};
  std::sort(diffs.begin(), diffs.end(),
            [](auto& u, auto& v) { return std::abs(u.first) > std::abs(v.first); });
  std::string out;
  for (const auto& [d, what] : diffs) {
    if (std::abs(d) < 0.01 * b.p.sim.step) continue;
    const double ms = std::abs(d) * 1e3;
    out += fmt::format("{}{} {} ms {}", out.empty() ? "" : ", ", what,
                       ms >= 100 ? fmt::format("{:.0f}", ms) : fmt::format("{:.3g}", ms),
                       d < 0 ? "less" : "more");
  }
  return fmt::format("{:.1f}% more tokens/s{}", 100 * (a.p.tokens_per_s / b.p.tokens_per_s - 1),
                     out.empty() ? "" : ": " + out);
}

nlohmann::json ranked_json(const Ranked& r) {
  const SimResult& s = r.p.sim;
  return {{"layout", r.layout.label()},
          {"shard_degree", r.layout.mesh.dp_shard},
          {"replicate_degree", r.layout.mesh.dp_replicate},
          {"tp_degree", r.layout.mesh.tp},
          {"pp_degree", r.layout.mesh.pp},
          {"pp_schedule", r.layout.mesh.pp > 1 ? pipe_schedule_name(r.layout.schedule) : ""},
          {"pp_virtual_stages", r.layout.virtual_stages},
          {"micro_batches", r.layout.micro_batches},
          {"activation_checkpointing", activation_checkpointing_name(r.layout.checkpointing)},
          {"reshard_to", r.layout.reshard_to},
          {"quantization", quantization_name(r.layout.quantization)},
          {"step_ms", s.step * 1e3},
          {"bound_ms", r.bound * 1e3},
          {"tokens_per_s", r.p.tokens_per_s},
          {"mfu", r.p.mfu},
          {"compute_ms", s.compute * 1e3},
          {"exposed_comm_ms", s.exposed * 1e3},
          {"exposed_tp_ms", s.tp_exposed * 1e3},
          {"pp_bubble", s.pp_bubble},
          {"memory_gib", r.p.memory_bytes / kPlanGiB},
          {"largest_memory_term", largest_term(r.p.memory)},
          {"overrides", r.layout.overrides()}};
}

// Tokens/s against memory per rank: every simulated layout, and the frontier (the fastest at
// each memory or less).
void plot_frontier(const std::vector<Ranked>& all, const std::string& out) {
  PlotSeries points{"simulated layouts", {}, true}, frontier{"frontier", {}, false, 2, true};
  std::vector<Ranked> by_memory = all;
  std::sort(by_memory.begin(), by_memory.end(),
            [](auto& a, auto& b) { return a.p.memory_bytes < b.p.memory_bytes; });
  double best = 0;
  for (const Ranked& r : by_memory) {
    points.points.push_back({r.p.memory_bytes / kPlanGiB, r.p.tokens_per_s});
    if (r.p.tokens_per_s > best) {
      best = r.p.tokens_per_s;
      frontier.points.push_back({r.p.memory_bytes / kPlanGiB, r.p.tokens_per_s});
    }
  }
  render_plot({{"simulate --plan: tokens/s against memory", "tokens/s", {points, frontier}}},
              "memory per rank, GiB", out);
}

// The search's record: what was tried, why layouts dropped out, what was simulated.
struct PlanSearch {
  int ranks = 0;
  double per_rank = 0;  // the cluster's memory a rank, bytes (0: unknown)
  size_t layouts = 0;
  std::map<std::string, int> too_big, refused;  // by largest term; by the runtime's reason
  double nearest = 0;  // the smallest budget that did not fit, its layout and largest term
  std::string nearest_label, nearest_term;
  std::vector<Candidate> kept;  // fitting, not dominated, by bound
  int dominated = 0, bounded_out = 0;
  int too_large = 0;              // over --max-memory in the engine, not simulated
  std::vector<Ranked> simulated;  // fastest first
  double seconds = 0;
  static int total(const std::map<std::string, int>& m) {
    int n = 0;
    for (const auto& [_, k] : m) n += k;
    return n;
  }
};

// Plans every layout (memory and the runtime's refusals, no simulation); the fitting ones in
// the order given.
std::vector<Candidate> screen(const std::vector<PlanLayout>& layouts, const Config& config,
                              const LoadedCluster& cluster, PlanSearch& search) {
  std::vector<Candidate> fit;
  for (const PlanLayout& l : layouts) {
    try {
      PlannedRow row = plan_row(l.apply(config), cluster, search.ranks, l.data, l.mesh);
      if (row.p.fits) {
        fit.push_back({l, std::move(row), 0});
        continue;
      }
      const std::string term = largest_term(row.p.memory);
      ++search.too_big[term];
      if (search.nearest == 0 || row.p.memory_bytes < search.nearest)
        search.nearest = row.p.memory_bytes, search.nearest_label = l.label(),
        search.nearest_term = term;
    } catch (const InputError& e) {
      const std::string reason = e.what();
      ++search.refused[reason.size() > 160 ? reason.substr(0, 157) + "..." : reason];
    }
  }
  return fit;
}

// Recomputation only costs time: of layouts alike but for it, the least that fits stays.
// Without stages, more micro-batches only split the same work finer and repeat collectives: of
// layouts alike but for them, the fewest that fit stays. (The layouts come in that order.)
void keep_undominated(std::vector<Candidate> fit, PlanSearch& search) {
  std::map<std::string, std::vector<std::pair<int, int>>> kept_counts;  // (M, checkpointing)
  for (Candidate& c : fit) {
    PlanLayout key = c.layout;
    key.checkpointing = ActivationCheckpointing::none;
    key.micro_batches = 0;
    const int M = c.layout.micro_batches, ac = int(c.layout.checkpointing);
    auto& counts = kept_counts[key.label()];
    const bool beaten = std::any_of(counts.begin(), counts.end(), [&](auto& kept_one) {
      return kept_one.second <= ac &&
             (kept_one.first == M || (c.layout.mesh.pp == 1 && kept_one.first <= M));
    });
    if (beaten) {
      ++search.dominated;
      continue;
    }
    counts.push_back({M, ac});
    search.kept.push_back(std::move(c));
  }
  for (Candidate& c : search.kept) c.bound = plan_lower_bound(c.row);
  std::sort(search.kept.begin(), search.kept.end(),
            [](auto& a, auto& b) { return a.bound < b.bound; });
}

// Simulates in the order of the bounds until the next bound cannot enter the best `top`.
void simulate_best(const SimulateOptions& o, size_t top, PlanSearch& search) {
  SimOptions options;
  options.max_ring_steps = o.max_ring_steps;
  options.every_node = o.every_node;
  std::vector<double> steps;  // sorted
  const double limit = engine_memory_limit(o.max_memory_gib);
  for (const Candidate& c : search.kept) {
    if (steps.size() >= top && c.bound >= steps[top - 1]) {
      ++search.bounded_out;
      continue;
    }
    // A layout the engine could not hold here (one that does not fold, at a large rank count) is
    // counted and passed over: the others are still ranked.
    if (engine_footprint(c.row.platform, c.layout.mesh, c.row.plan, options).bytes > limit) {
      ++search.too_large;
      continue;
    }
    const SimResult sim = simulate_step(c.row.platform, c.layout.mesh, c.row.plan, options);
    search.simulated.push_back({c.layout, finish_row(c.row, sim), c.bound});
    steps.insert(std::upper_bound(steps.begin(), steps.end(), sim.step), sim.step);
  }
  std::sort(search.simulated.begin(), search.simulated.end(),
            [](auto& a, auto& b) { return a.p.sim.step < b.p.sim.step; });
}

void print_plan(const PlanSearch& s, const Config& config, const LoadedCluster& cluster,
                size_t shown) {
  const ModelConfig& m = config.model;
  fmt::print("plan: {} L={} C={} T={} on {} ranks of '{}' ({:.1f} GiB a rank), global batch {}\n",
             m.family, m.n_layer, m.n_embd, config.training.seq_len, s.ranks, cluster.spec.name,
             s.per_rank / kPlanGiB, config.training.global_batch);
  std::string misfits, commonest;
  for (const auto& [term, n] : s.too_big)
    misfits += fmt::format("{}{} by {}", misfits.empty() ? "" : ", ", n, term);
  int most = 0;
  for (const auto& [reason, n] : s.refused)
    if (n > most) most = n, commonest = reason;
  fmt::print(
      "searched {} layouts in {:.1f} s: {} do not fit{}, {} cannot run{}, {} only cost time "
      "beside one kept, {} bounded out, {}{} simulated\n",
      s.layouts, s.seconds, PlanSearch::total(s.too_big),
      misfits.empty() ? "" : " (the largest term: " + misfits + ")", PlanSearch::total(s.refused),
      commonest.empty() ? "" : fmt::format(" ({} of them: {})", most, commonest), s.dominated,
      s.bounded_out,
      s.too_large ? fmt::format("{} too large for the engine here (--max-memory), ", s.too_large)
                  : "",
      s.simulated.size());
  fmt::print("{:>3} {:<48} {:>12} {:>6} {:>10} {:>6} {:>7} {:>8}\n", "#", "layout", "tokens/s",
             "MFU", "step_ms", "exp%", "bubble", "mem_GiB");
  for (size_t i = 0; i < shown; ++i) {
    const Ranked& r = s.simulated[i];
    const SimResult& sim = r.p.sim;
    fmt::print("{:>3} {:<48} {:>12.0f} {:>5.1f}% {:>10.2f} {:>5.1f}% {:>6.1f}% {:>8.2f}\n", i + 1,
               r.layout.label(), r.p.tokens_per_s, 100 * r.p.mfu, sim.step * 1e3,
               100 * (sim.exposed + sim.tp_exposed) / sim.step, 100 * sim.pp_bubble,
               r.p.memory_bytes / kPlanGiB);
  }
  for (size_t i = 0; i + 1 < shown; ++i)
    fmt::print("  {} over {}: {}\n", i + 1, i + 2, why_faster(s.simulated[i], s.simulated[i + 1]));
  if (shown > 0)
    fmt::print("1 as overrides (for train): {}\n",
               fmt::join(s.simulated[0].layout.overrides(), " "));
}

nlohmann::json plan_json(const PlanSearch& s, const LoadedCluster& cluster, size_t shown) {
  nlohmann::json j = {{"cluster", cluster.spec.name},
                      {"ranks", s.ranks},
                      {"memory_per_rank_gib", s.per_rank / kPlanGiB},
                      {"layouts", s.layouts},
                      {"do_not_fit", s.too_big},
                      {"cannot_run", s.refused},
                      {"dominated", s.dominated},
                      {"bounded_out", s.bounded_out},
                      {"too_large_to_simulate", s.too_large},
                      {"simulated", s.simulated.size()},
                      {"seconds", s.seconds},
                      {"best", nlohmann::json::array()}};
  for (size_t i = 0; i < shown; ++i) j["best"].push_back(ranked_json(s.simulated[i]));
  return j;
}

}  // namespace

int run_plan(const SimulateOptions& o, const Config& config, const LoadedCluster& cluster) {
  if (o.ranks.size() > 1)
    fail_input("simulate --plan plans one rank count; --ranks gave {}", o.ranks.size());
  if (!o.meshes.empty()) fail_input("simulate --plan searches the meshes itself; drop --mesh");
  if (o.top < 0) fail_input("--top {} must be 0 (every layout that fits) or more", o.top);
  const auto begin = std::chrono::steady_clock::now();
  PlanSearch search;
  search.ranks = o.ranks.empty() ? cluster.spec.world() : o.ranks.front();
  search.per_rank =
      cluster.spec.memory_per_node / std::min(search.ranks, cluster.spec.ranks_per_node);
  platform_for(cluster, search.ranks);  // whole nodes, else exit 2 naming --ranks
  const std::vector<PlanLayout> layouts =
      plan_layouts(config, search.ranks, cluster.spec.ranks_per_node);
  if (layouts.empty())
    fail_input(
        "simulate --plan: training.global_batch = {} splits over the data-parallel ranks of no "
        "layout of {} ranks (ranks / (tp x pp), tp dividing a node's {} ranks, pp at most "
        "model.n_layer = {}); make it a multiple of the ranks",
        config.training.global_batch, search.ranks,
        std::min(search.ranks, cluster.spec.ranks_per_node), config.model.n_layer);
  search.layouts = layouts.size();
  std::vector<Candidate> fit = screen(layouts, config, cluster, search);
  if (fit.empty() && search.nearest > 0)
    fail_input(
        "simulate --plan: none of the {} layouts of {} ranks fits '{}' ({} a rank): the "
        "smallest, {}, needs {}, most of it {}; more ranks, a smaller model or a shorter "
        "sequence would fit",
        layouts.size(), search.ranks, cluster.spec.name, memory_text(search.per_rank),
        search.nearest_label, memory_text(search.nearest), search.nearest_term);
  if (fit.empty())
    fail_input("simulate --plan: no layout of {} ranks can run{}", search.ranks,
               search.refused.empty() ? std::string() : ": " + search.refused.begin()->first);
  keep_undominated(std::move(fit), search);
  const size_t top = o.top > 0 ? size_t(o.top) : search.kept.size();
  simulate_best(o, top, search);
  if (search.simulated.empty())
    fail_input(
        "simulate --plan: every one of the {} layouts that fit is too large for the engine here "
        "(their estimates exceed --max-memory, {:.2f} GiB); raise --max-memory on a machine "
        "with the memory",
        search.kept.size(), engine_memory_limit(o.max_memory_gib) / kPlanGiB);
  search.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  const size_t shown = std::min(top, search.simulated.size());
  if (o.common.json)
    fmt::print("{}\n", plan_json(search, cluster, shown).dump());
  else
    print_plan(search, config, cluster, shown);
  if (!o.plot.empty()) plot_frontier(search.simulated, o.plot);
  return 0;
}

}  // namespace st
