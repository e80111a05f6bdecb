#pragma once
// What `train` and `bench step` share: ranks, config, data and a sharded trainer, set up with
// one agreed outcome across ranks (one error message, never a rank left waiting).
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "api/rank_context.hpp"
#include "core/timer.hpp"
#include "launch/commands.hpp"
#include "launch/config.hpp"
#include "launch/elastic.hpp"
#include "launch/service_cost.hpp"
#include "launch/sharded_trainer.hpp"

namespace st {

struct Session {
  RankContext ranks;
  Config config;
  std::optional<Dataset> data;
  std::unique_ptr<ShardedTrainer> trainer;
  int threads = 1;
  // The matmul peak, summed over ranks: the best seen by measure_peak() (launch/peak.hpp)
  // at start-up and whenever a benchmark measures it again, and the shapes it tries.
  double peak_gflops = 0;
  std::string peak_shapes;
  // Where peak_gflops came from, for the start-up summary: measured now, or the best this
  // machine has shown (launch/peak_cache.hpp), with what start-up measured.
  std::string peak_source;
  // Said once, on the next step line, when a step ran faster than the peak (which is then
  // raised to that step's rate: MFU never reads above 100%).
  std::string peak_note;
  double test_peak_gflops = 0;    // a test hook: what start-up measures, whatever it measured
  DType peak_dtype = DType::f32;  // the dtype of the matmul that runs (fp32 when bf16 is widened)
  double baseline_rss_mib = 0;    // RSS before the model existed (libraries, MPI, data)
  Timer services_clock;           // since start_services()
  // Set when launch/shardrun started this run again after a failure, with what the config had
  // to change for it (a resume, a mesh that fits the ranks that remain).
  std::optional<RestartNotice> restart;
  std::string restart_changes;
  // Beside the training loop, as `train` runs it (benchmarks too, so they measure what users
  // run): the heartbeat (training.stall_timeout; the collectives' watchdog and, with
  // checkpoint.async, the writer thread come with the trainer). Held here, outside the work
  // that run_after_startup wraps, so that a failure unwinding still sends this rank's abort
  // notice.
  std::unique_ptr<Heartbeat> heartbeat;
  // What the services cost while they ran (the largest over ranks), set by stop_services().
  ServiceCost service_cost;
  bool lead() const { return ranks.rank() == 0; }
  // Collective: starts the heartbeat over every rank.
  void start_services();
  // Collective: measures what the services cost, then every rank stops its heartbeat together
  // (after that agreement), so none stops beating while another still judges it.
  void stop_services();
  // Measures the peak again (a collective) and keeps the best: benchmarks call it at the end.
  // `model` gives the shape of its largest matmul (trainer's model when null).
  void measure_peak(const Model* model = nullptr);
  // Collective: the peak from `measured` (this start-up's) and the best this machine has shown
  // for the same layout (rank 0's cache), whichever is higher; a new best is cached.
  void adopt_best_peak(double measured, int trials);
  std::string peak_key;  // launch/peak_cache.hpp's key for this run's layout
  // The one MFU formula: the model's FLOPs per token at `tokens_per_s`, over the peak of
  // every rank together (peak_gflops). A rate above the peak proves the peak low: the peak is
  // raised to it (and cached as this machine's best), peak_note says so, and the MFU is 1,
  // which mfu_plausible() calls doubtful.
  double mfu(double tokens_per_s);
};

// `adjust` may change the config after loading (e.g. the benchmark's step count).
// `before_work` runs on every rank once the config, data and model specs are read and before
// anything is allocated, measured or printed: the checks of a command's own inputs and outputs
// (it agrees on their outcome itself).
Session open_session(const CommonOptions& options,
                     const std::function<void(Config&)>& adjust = nullptr,
                     const std::function<void(Session&)>& before_work = nullptr);

// An MFU as people read it: "54.6%"; "100.0%?!" where the step reached the peak it is measured
// against (the peak was measured too low: a step cannot beat the hardware), never more.
std::string mfu_text(double mfu);
// Strictly between 0 and 1: an MFU of 1 is a peak raised to the step's own rate, not a result.
bool mfu_plausible(double mfu);

// The time by kind of work (core/op_profile.hpp) as JSON: {"matmul": ms, ...}.
nlohmann::json op_times_json(const OpTimes& ms);

// The start-up summary: machine, model, ranks, units, precision, memory (rank 0 prints it).
void print_summary(Session& s);

// The data a config names (data.path, or the built-in corpus); errors name data.path.
Dataset load_data(const Config& config);

// The start-up warning when threads x ranks on this node exceed its cores ("" when they fit);
// its advice depends on whether training.threads is automatic (0) or set.
std::string oversubscription_warning(int threads, int ranks_on_node, int cores,
                                     bool threads_automatic);

// The one thread-count rule: training.threads, or (0) this node's cores split over its ranks.
// Sets OpenMP's team size and returns it.
int use_threads(const Config& config, int ranks_on_node);

}  // namespace st
