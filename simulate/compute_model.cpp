#include "simulate/compute_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.hpp"

namespace st {

ModelWork profiled_work(const ProfiledModel& m, int64_t rows) {
  const ModelFamily& family = model_family(m.family);
  ModelConfig c;
  c.family = m.family;
  c.n_layer = m.n_layer, c.n_embd = m.n_embd, c.n_head = m.n_head;
  c.block_size = m.seq_len, c.vocab_size = m.vocab, c.padded_vocab_size = m.vocab;
  c.own = m.own;
  const std::unique_ptr<Model> model = family.build(c, DType::f32);  // on meta: shapes only
  using enum ActivationCheckpointing;
  for (const ActivationCheckpointing mode : {none, selective, full})
    if (m.activation_checkpointing == activation_checkpointing_name(mode))
      model->set_activation_checkpointing(mode);
  return model->work(rows, m.seq_len);
}

namespace {

// Times from rates: matmul FLOP/s and elementwise bytes/s.
ComputeTimes from_rates(const ModelWork& w, int64_t L, double flops_rate, double bytes_rate) {
  auto t = [&](const SegmentWork& s) { return s.flops / flops_rate + s.bytes / bytes_rate; };
  ComputeTimes c;
  c.root_forward_pre = t(w.root_forward_pre);
  c.root_forward_post = t(w.root_forward_post);
  c.root_backward_pre = t(w.root_backward_pre);
  c.root_backward_post = t(w.root_backward_post);
  c.block_forward.assign(size_t(L), t(w.block_forward));
  c.block_backward.assign(size_t(L), t(w.block_backward));
  return c;
}

// The profile's sample to start from: the threads and the ranks per core asked for (else the
// nearest), then the rows asked for (else the nearest on a log scale).
const ComputeSample& nearest_sample(const CalibrationProfile& p, int threads, double ranks_per_core,
                                    int64_t rows) {
  const ComputeSample* best = nullptr;
  double best_score = std::numeric_limits<double>::infinity();
  for (const ComputeSample& s : p.compute) {
    const double score = 100.0 * std::abs(std::log(double(s.threads) / threads)) +
                         100.0 * std::abs(std::log(double(s.ranks) / p.cores / ranks_per_core)) +
                         std::abs(std::log(double(s.rows) / double(rows)));
    if (score < best_score) best_score = score, best = &s;
  }
  return *best;
}

}  // namespace

ComputeTimes compute_times(const ComputeShape& shape, const ClusterSpec& cluster,
                           const CalibrationProfile* profile) {
  const int64_t L = shape.model.n_layer;
  const ModelWork work = shape.work ? *shape.work : profiled_work(shape.model, shape.rows);
  ComputeTimes c;
  if (profile) {
    const double ranks_per_core = std::min(cluster.ranks_per_core(), 1.0 / shape.threads);
    const ComputeSample& s = nearest_sample(*profile, shape.threads, ranks_per_core, shape.rows);
    // The sample's own work at its rows gives its achieved rates.
    const ModelWork at = profiled_work(profile->model, s.rows);
    const double total = s.total();
    const double flops_rate = at.total_flops(profile->model.n_layer) / (s.matmul_share * total);
    const double bytes_rate =
        at.total_bytes(profile->model.n_layer) / ((1 - s.matmul_share) * total);
    if (profile->model == shape.model && shape.tp == 1 && s.rows == shape.rows &&
        s.threads == shape.threads &&
        std::abs(double(s.ranks) / profile->cores - ranks_per_core) < 1e-9) {
      static_cast<SegmentTimes&>(c) = s;  // measured
      c.source = fmt::format("measured ({} profile, {} rows, {} threads)", profile->model.family,
                             s.rows, s.threads);
    } else {
      c = from_rates(work, L, flops_rate, bytes_rate);
      // Fewer threads than measured: the same work on fewer cores.
      const double thread_scale = double(s.threads) / shape.threads;
      c.scale(std::max(1.0, thread_scale));
      c.source = fmt::format(
          "scaled from the {} profile's {} rows x {} threads ({:.0f} GFLOP/s matmul, {:.1f} GB/s "
          "rest)",
          profile->model.family, s.rows, s.threads, flops_rate / 1e9, bytes_rate / 1e9);
    }
    c.optimizer_per_element =
        s.optimizer_per_element * std::max(1.0, double(s.threads) / shape.threads);
    c.codec_per_value =
        kCodecBytesPerValue / bytes_rate * std::max(1.0, double(s.threads) / shape.threads);
    c.step_overhead = s.step_overhead;
  } else {
    if (!(cluster.matmul_flops > 0) || !(cluster.memory_bandwidth > 0))
      fail_input("cluster '{}': compute needs a profile, or matmul_gflops and memory_gbps",
                 cluster.name);
    // The stated rates at the efficiencies the model's work reaches (given, or fitted to a
    // published row: launch/simulate_calibration.cpp).
    const double flops = cluster.matmul_flops * cluster.matmul_efficiency,
                 bandwidth = cluster.memory_bandwidth * cluster.memory_efficiency;
    c = from_rates(work, L, flops, bandwidth);
    // AdamW reads master, gradient, m, v and writes master, m, v (and the norm reads the
    // gradient once more): 32 bytes per element.
    c.optimizer_per_element = 32.0 / bandwidth;
    c.codec_per_value = kCodecBytesPerValue / bandwidth;
    c.source = fmt::format("from the cluster's rates ({:.0f} GFLOP/s matmul, {:.0f} GB/s memory)",
                           cluster.matmul_flops / 1e9, cluster.memory_bandwidth / 1e9);
    if (cluster.matmul_efficiency != 1 || cluster.memory_efficiency != 1)
      c.source +=
          fmt::format(" at {:.1f}% and {:.1f}% of them{}", 100 * cluster.matmul_efficiency,
                      100 * cluster.memory_efficiency,
                      cluster.efficiency_source.empty() ? "" : ", " + cluster.efficiency_source);
  }
  return c;
}

}  // namespace st
