#include "launch/commands.hpp"

#include <fmt/format.h>

#include <algorithm>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/file_io.hpp"
#include "core/liveness.hpp"
#include "core/memory_stats.hpp"
#include "core/progress.hpp"
#include "core/staged_output.hpp"
#include "core/timer.hpp"
#include "launch/elastic.hpp"
#include "launch/fault_injection.hpp"
#include "launch/interrupt.hpp"
#include "launch/session.hpp"
#include "launch/trace_session.hpp"
#include "launch/training_cadence.hpp"

namespace st {
namespace {

nlohmann::json step_json(Session& s, const StepStats& st) {
  const double tokens_per_s = double(st.tokens) / (st.slowest_step_ms / 1e3);
  const double mfu = s.mfu(tokens_per_s);
  return {{"step", st.step},
          {"loss", st.loss},
          {"lr", st.lr},
          {"grad_norm", st.grad_norm},
          {"tokens_per_s", tokens_per_s},
          {"mfu", mfu},
          {"mfu_plausible", mfu_plausible(mfu)},
          {"peak_gflops", s.peak_gflops},
          {"peak_dtype", dtype_name(s.peak_dtype)},
          {"step_ms", st.slowest_step_ms},
          {"rank0_op_ms", op_times_json(st.op_ms)},
          {"exposed_comm_ms", st.comm.exposed_ms},
          // Tensor parallelism's collectives (0 without TP): all exposed, beside FSDP's.
          {"exposed_tp_ms", st.comm.tp_exposed_ms},
          {"tp_reduced_mib", double(st.comm.tp_bytes) / kMiB},
          // Pipeline parallelism (0 without): the measured bubble, rank 0's waits for its
          // neighbours and its bytes sent to them.
          {"pp_bubble", st.pp_bubble},
          {"pp_wait_ms", st.pipeline.wait_ms},
          {"pp_sent_mib", double(st.pipeline.sent_bytes) / kMiB},
          {"peak_rss_mib", st.max_peak_rss_mib},
          {"budget_mib", double(s.trainer->budget().total()) / kMiB + s.baseline_rss_mib},
          {"tracked_mib", double(tensor_memory().peak_bytes) / kMiB},
          // Rank 0's own bytes by kind (the unsharded buffers' peak within this step).
          {"shards_mib", double(st.memory.shard_bytes) / kMiB},
          {"optimizer_mib", double(s.trainer->optimizer_state_bytes()) / kMiB},
          {"unsharded_peak_mib", double(st.memory.unsharded_peak_bytes) / kMiB},
          {"activations_mib", double(s.trainer->budget().activations) / kMiB},
          {"gathered_mib", double(st.comm.gathered_bytes) / kMiB},
          {"regathered_mib", double(st.comm.regathered_bytes) / kMiB},
          {"scattered_mib", double(st.comm.scattered_bytes) / kMiB},
          {"replicated_mib", double(st.comm.replicated_bytes) / kMiB},
          {"collective_ms", st.comm.collective_ms},
          // Bus bandwidth of this rank's all-gathers and reduce-scatters while they ran.
          {"bus_gbps", st.comm.collective_ms > 0
                           ? double(st.comm.gathered_bytes + st.comm.scattered_bytes) *
                                 double(s.ranks.size() - 1) / double(s.ranks.size()) /
                                 (st.comm.collective_ms * 1e6)
                           : 0.0},
          {"rank0_step_ms", st.step_ms},
          {"rank_step_ms", st.rank_step_ms},
          {"rank_peak_rss_mib", st.rank_peak_rss_mib},
          {"tokens_per_step", st.tokens},
          {"ranks", s.ranks.size()}};
}

void write_metrics_line(OutputFile& metrics, std::string line, const std::string& what);

// The checkpoint resumed from ("" for none) and its steps.
struct Resumed {
  std::string from;
  int64_t steps = 0;
};

// The step to start from: 0, or the steps of the checkpoint that checkpoint.resume names
// (auto: the newest complete one under checkpoint.dir), verified and loaded on every rank.
Resumed resume(Session& s) {
  const auto& ckpt = s.config.checkpoint;
  Resumed r;
  agree_on_startup(*s.ranks.group, [&] {
    std::string from;
    if (ckpt.resume.newest()) {
      from = latest_checkpoint(ckpt.dir);
      if (s.lead())
        for (const std::string& skipped : skipped_incomplete_checkpoints(ckpt.dir))
          fmt::print(stderr, "checkpoint | skipped {}\n", skipped);
    } else if (const std::string* path = ckpt.resume.path())
      from = *path;
    if (from.empty()) return;
    Progress progress("checkpoint", 0, s.lead());
    progress.update(0, "verifying and loading " + from);
    r.steps = s.trainer->load_checkpoint(from);
    r.from = from;
    progress.finish(fmt::format("resumed from {} after step {}", from, r.steps));
  });
  return r;
}

// A resumed run continues metrics.file: the earlier run's lines up to the step resumed from
// stay (later ones, whose steps are computed again now, go). `earlier` is the file's text
// before this run opened it.
void carry_metrics_over(OutputFile* metrics, const std::string& earlier, int64_t steps_done) {
  if (!metrics || steps_done == 0) return;
  for (const std::string& line : metrics_lines_to_keep(earlier, steps_done))
    write_metrics_line(*metrics, line, "the earlier run's lines");
}

// A background save that finished (checkpoint.async), as the training thread learns of it at a
// step boundary: complete (its writer thread has already recorded it as the newest checkpoint),
// given up (said; the previous checkpoint stays), or failed (the lowest rank whose write failed
// removes the temporaries and ends the job with its message; the others go on until it does).
void report_background_save(Session& s, const BackgroundSave& done, double duration_s, bool json,
                            const std::string& newest) {
  std::FILE* out = json ? stderr : stdout;
  switch (done.outcome) {
    case BackgroundSave::Outcome::complete:
      if (s.lead())
        fmt::print(out, "checkpoint | saved {} in the background ({:.2f}s after the hand-over)\n",
                   done.path, duration_s);
      return;
    case BackgroundSave::Outcome::abandoned:
      if (s.lead())
        fmt::print(out,
                   "checkpoint | gave up the background save of step {} after {:.1f}s ({}; "
                   "checkpoint.async_timeout = {:g} s): {} stays the newest complete checkpoint, "
                   "and later saves are synchronous\n",
                   done.step, duration_s, done.message, s.config.checkpoint.async_timeout,
                   newest.empty() ? std::string("none") : newest);
      return;
    case BackgroundSave::Outcome::failed:
      if (!done.lowest_failed) return;  // that rank ends the job
      remove_unfinished_save(s.config.checkpoint.dir, done.step);
      // An I/O error keeps its errno, so the failure record says ENOSPC, not "other".
      if (done.error != 0)
        fail_io(done.error, "checkpoint.async: the background save of step {} failed: {}",
                done.step, done.message);
      fail("checkpoint.async: the background save of step {} failed: {}", done.step, done.message);
  }
}

// A restart by shardrun: its one line (stdout, or stderr under --json) and its record in
// metrics.file.
void report_restart(Session& s, const Resumed& r, bool json, OutputFile* metrics) {
  if (!s.restart || !s.lead()) return;
  const RestartNotice& n = *s.restart;
  const std::string mesh = s.trainer->mesh().describe();
  fmt::print(json ? stderr : stdout, "{}\n",
             restart_line(n, r.from, r.steps, s.ranks.size(), mesh, s.restart_changes));
  if (metrics)
    write_metrics_line(*metrics,
                       nlohmann::json{{"restart", n.number},
                                      {"of", n.limit},
                                      {"reason", n.reason},
                                      {"checkpoint", r.from},
                                      {"after_step", r.steps},
                                      {"failed_after_step", n.failed_after_step},
                                      {"ranks", s.ranks.size()},
                                      {"ranks_before", n.ranks_before},
                                      {"mesh", mesh}}
                           .dump(),
                       "the restart record");
}

std::string save(Session& s, int64_t steps_done) {
  Progress progress("checkpoint", 0, s.lead());
  progress.update(0, fmt::format("saving step {} to {}", steps_done, s.config.checkpoint.dir));
  const std::string path = s.trainer->save_checkpoint(steps_done);
  progress.finish("saved " + path);
  return path;
}

// checkpoint.async: hands the state to the background writer (after the save in flight, whose
// outcome `report_finished` reports), or saves synchronously once background saves are off.
void save_in_background(Session& s, int64_t steps_done, bool json, double& wait_ms,
                        const std::function<void()>& report_finished) {
  const ShardedTrainer::CheckpointStall stall =
      s.trainer->save_checkpoint_in_background(steps_done);
  wait_ms = stall.wait_ms;
  report_finished();
  if (!s.lead()) return;
  if (stall.background)
    fmt::print(json ? stderr : stdout,
               "checkpoint | step {} handed to the background writer ({:.1f} ms{})\n", steps_done,
               stall.save_ms,
               stall.wait_ms >= 1
                   ? fmt::format(", {:.0f} ms waiting for the previous save", stall.wait_ms)
                   : std::string());
  else
    fmt::print(json ? stderr : stdout, "checkpoint | saved {} synchronously ({:.1f}s)\n",
               stall.path, stall.save_ms / 1e3);
}

void print_step_line(const StepStats& st, const nlohmann::json& line, int64_t max_steps,
                     double eta_s, const std::optional<ValidationResult>& val) {
  fmt::print(
      "step {:>5}/{} | loss {:.4f} | lr {:.2e} | norm {:.3f} | {:>7.0f} tok/s | mfu {} "
      "| {:.1f} ms (comm exposed {:.1f}{}{}) | rss {:.0f} MiB | eta {}{}\n",
      st.step + 1, max_steps, st.loss, st.lr, st.grad_norm, line["tokens_per_s"].get<double>(),
      mfu_text(line["mfu"].get<double>()), st.slowest_step_ms, st.comm.exposed_ms,
      st.comm.tp_collectives > 0 ? fmt::format(", tp exposed {:.1f}", st.comm.tp_exposed_ms)
                                 : std::string(),
      st.pipeline.step_ms > 0 ? fmt::format(", bubble {:.0f}%", 100 * st.pp_bubble) : std::string(),
      st.max_peak_rss_mib, format_duration(eta_s),
      val ? fmt::format(" | val {:.4f}", val->loss) : std::string());
}

// One JSON line into metrics.file; a failed write names the file and what was being written.
void write_metrics_line(OutputFile& metrics, std::string line, const std::string& what) {
  line += '\n';
  try {
    metrics.write(line.data(), line.size());
  } catch (const Error& e) {
    fail("metrics.file: {} ({})", e.what(), what);
  }
}

// checkpoint.every: saves after `steps_done` steps when a save is due then (never after the last
// step, which the final save follows). Returns the ms the loop spent on it (0: none due), and
// in `wait_ms` the part spent waiting for the previous background save.
double save_if_due(Session& s, int64_t steps_done, bool json, double& wait_ms,
                   const std::function<void()>& report_finished) {
  const auto& ckpt = s.config.checkpoint;
  wait_ms = 0;
  if (ckpt.dir.empty() || ckpt.every <= 0 || steps_done % ckpt.every != 0 ||
      steps_done >= s.config.training.max_steps)
    return 0;
  Timer saving;
  if (ckpt.async)
    save_in_background(s, steps_done, json, wait_ms, report_finished);
  else
    save(s, steps_done);
  return saving.ms();
}

// One step's line, rank 0's: into metrics.file, and printed when metrics.log_every says so
// (JSON, or the text line with an ETA); with the validation after it, if one was due.
struct StepPosition {
  int64_t step, start, max_steps;
};
void report_step(Session& s, const StepStats& st, StepPosition at, double checkpoint_ms,
                 double checkpoint_wait_ms, bool json, OutputFile* metrics, Progress& progress,
                 const Timer& run_clock, const std::optional<ValidationResult>& val) {
  nlohmann::json line = step_json(s, st);
  line["checkpoint_ms"] = checkpoint_ms;
  line["checkpoint_wait_ms"] = checkpoint_wait_ms;
  line["checkpoint_stage_wait_ms"] = st.checkpoint_stage_wait_ms;
  if (metrics) write_metrics_line(*metrics, line.dump(), fmt::format("step {}", at.step + 1));
  if (metrics && val)
    write_metrics_line(*metrics, validation_record(*val).dump(),
                       fmt::format("the validation after step {}", at.step + 1));
  const bool printed = step_line_due(s.config, at.step + 1, val.has_value());
  if (json) {
    if (printed) fmt::print("{}\n", line.dump());
    if (val) fmt::print("{}\n", validation_record(*val).dump());
    progress.update(long(at.step + 1 - at.start), fmt::format("loss {:.4f}", st.loss));
  } else if (printed) {
    const double done = double(at.step + 1 - at.start);
    print_step_line(st, line, at.max_steps,
                    run_clock.seconds() / done * double(at.max_steps - at.step - 1), val);
  }
  if (!s.peak_note.empty()) {
    fmt::print(json ? stderr : stdout, "{}\n", s.peak_note);
    s.peak_note.clear();
  }
  flush_standard_output();
}

// After the last step: the trace file, then the validation loss (also into metrics.file, as
// {"after_step": N, "val_loss": ..., "val_tokens": T}, for `shardtrain plot`), then the services
// stopped (a collective) and their cost ({"services": ...}).
void finish_run(Session& s, TraceSession& trace, bool json, OutputFile* metrics,
                const std::optional<ValidationResult>& last_step_validation) {
  if (trace.enabled()) {
    const int64_t spans = trace.write();
    if (s.lead() && !json)
      fmt::print("trace: {} ({} spans; open in https://ui.perfetto.dev or chrome://tracing)\n",
                 s.config.metrics.trace, spans);
  }
  // A periodic validation after the last step over the final one's windows is the final one:
  // not computed or recorded twice (every rank has the same periodic result).
  const int64_t final_tokens =
      s.trainer->validation_windows(kFinalValidationWindows) * s.config.training.seq_len;
  const bool reuse = last_step_validation && last_step_validation->tokens == final_tokens;
  const double val =
      reuse ? last_step_validation->loss : s.trainer->evaluate(kFinalValidationWindows);
  s.stop_services();
  if (!s.lead()) return;
  if (metrics && !std::isnan(val) && !reuse)
    write_metrics_line(*metrics,
                       validation_record({s.config.training.max_steps, val, final_tokens}).dump(),
                       "the validation loss");
  // What the heartbeat, the watchdog, the communication threads and the writer cost the run.
  if (metrics)
    write_metrics_line(*metrics, nlohmann::json{{"services", s.service_cost.json()}}.dump(),
                       "the services' cost");
  if (std::isnan(val)) {  // no whole window in the validation split
    if (json)
      fmt::print("{}\n", nlohmann::json{{"val_loss", nullptr}}.dump());
    else
      fmt::print(
          "validation loss: none (the validation split of {} holds {} tokens, fewer than one "
          "window of training.seq_len + 1 = {}; data.val_fraction = {})\n",
          s.data->source(), s.data->val().size(), s.config.training.seq_len + 1,
          s.config.data.val_fraction);
  } else if (json) {
    fmt::print("{}\n", nlohmann::json{{"val_loss", val}}.dump());
  } else {
    fmt::print("validation loss: {:.4f}\n", val);
  }
}

// What a run writes besides checkpoints, opened and checked on every rank with one agreed
// outcome: metrics.file (with what an earlier run of a resumed job wrote there), checkpoint.dir
// (locked by rank 0, an interrupted save's leftovers removed) and metrics.trace.
struct RunOutputs {
  std::unique_ptr<OutputFile> metrics;
  std::optional<DirectoryLock> checkpoint_lock;
  std::vector<std::string> cleaned;  // what was removed from checkpoint.dir
  std::string earlier_metrics;       // what a resumed run carries over
};

// Fills `o` (not returned: a DirectoryLock does not move).
void open_run_outputs(Session& s, RunOutputs& o) {
  std::error_code ignored;  // a path that cannot be looked at has nothing to carry over
  agree_on_startup(*s.ranks.group, [&] {
    if (s.lead() && !s.config.metrics.file.empty()) {
      if (!s.config.checkpoint.resume.never() && !s.config.checkpoint.dir.empty() &&
          std::filesystem::is_regular_file(s.config.metrics.file, ignored))
        o.earlier_metrics = read_text_file(s.config.metrics.file);
      o.metrics = open_log_output(s.config.metrics.file, "metrics.file");
    }
    // Every rank writes its checkpoint files: checked from every rank's side, now rather than
    // at the first save. Rank 0 then holds the directory for this job, so what an earlier,
    // killed job left there can go.
    if (!s.config.checkpoint.dir.empty()) {
      try {
        ensure_writable_directory(s.config.checkpoint.dir);
      } catch (const InputError& e) {
        fail_input("checkpoint.dir: {}", e.what());
      }
      if (s.lead()) {
        o.checkpoint_lock.emplace(s.config.checkpoint.dir, "checkpoint.dir");
        o.cleaned = clean_interrupted_saves(s.config.checkpoint.dir);
      }
    }
    if (s.lead() && !s.config.metrics.trace.empty())
      StagedOutput(s.config.metrics.trace, "metrics.trace").check_writable();
  });
}

// The checkpoint a resume would load, checked against the config before any work (a changed
// global batch refused before the peak is measured and the summary printed).
void check_resume_point(Session& s) {
  const auto& ckpt = s.config.checkpoint;
  agree_on_startup(*s.ranks.group, [&] {
    const std::string from = ckpt.resume.newest() ? latest_checkpoint(ckpt.dir)
                             : ckpt.resume.path() ? *ckpt.resume.path()
                                                  : std::string();
    if (!from.empty()) check_resumable(read_checkpoint_info(from), s.config);
  });
}

}  // namespace

int run_train(const CommonOptions& options) {
  // Declared before the session: the outputs are opened and checked before any work.
  RunOutputs outputs;
  Session s = open_session(options, nullptr, [&](Session& session) {
    check_resume_point(session);  // first: a refused resume leaves metrics.file as it was
    open_run_outputs(session, outputs);
  });
  return run_after_startup([&] {
    std::unique_ptr<OutputFile>& metrics = outputs.metrics;
    std::string& earlier_metrics = outputs.earlier_metrics;
    const std::vector<std::string>& cleaned = outputs.cleaned;
    if (!options.json) print_summary(s);
    for (const std::string& line : cleaned)
      fmt::print(options.json ? stderr : stdout, "checkpoint | {}\n", line);
    const FaultInjection faults(options, s.ranks.rank());
    s.trainer->slow_checkpoint_writes(faults.slow_checkpoint_ms());
    const auto& ckpt = s.config.checkpoint;
    const Resumed resumed = resume(s);
    const int64_t start = resumed.steps, max_steps = s.config.training.max_steps;
    carry_metrics_over(metrics.get(), earlier_metrics, start);
    earlier_metrics.clear();
    report_restart(s, resumed, options.json, metrics.get());
    if (start >= max_steps && s.lead())
      fmt::print(stderr,
                 "train: nothing to train: the checkpoint resumed is after step {} and "
                 "training.max_steps = {}; raise training.max_steps to train on\n",
                 start, max_steps);
    TraceSession trace(*s.ranks.group, s.config.metrics.trace, s.config.metrics.trace_steps);
    Timer run_clock;
    // With --json, stdout carries only JSON; the progress line goes to stderr.
    Progress step_progress("train", long(max_steps - start), s.lead() && options.json);
    install_interrupt_handlers(s.lead(), s.ranks.mpi);
    s.start_services();
    // A save becomes the newest complete checkpoint the moment its marker is durable: an
    // interruption after that names it, even before the save returns (a background save's
    // writer thread says so itself).
    // Shared: a background save in flight holds the callback, whatever ends this scope.
    const auto note =
        std::make_shared<TrainingStateNote>(s.lead(), max_steps, latest_checkpoint(ckpt.dir));
    s.trainer->on_checkpoint_complete(
        [note](const std::string& path) { note->checkpoint_complete(path); });
    auto take_background_save = [&](bool wait) {
      double duration_s = 0;
      if (auto done = s.trainer->finished_background_save(wait, &duration_s))
        report_background_save(s, *done, duration_s, options.json, note->newest());
    };
    // What the last save cost the loop, reported with the step after it.
    double checkpoint_ms = 0, checkpoint_wait_ms = 0;
    if (ckpt.async && !ckpt.dir.empty() && s.lead() && !s.trainer->background_saves_off().empty())
      fmt::print(options.json ? stderr : stdout,
                 "checkpoint | checkpoint.async: saves are synchronous here: {}\n",
                 s.trainer->background_saves_off());
    std::optional<ValidationResult> val;  // this step's periodic validation, if one was due
    for (int64_t step = start; step < max_steps; ++step) {
      faults.before_step(step);
      take_background_save(false);
      note->step(step);
      liveness::set_step(step);
      liveness::set_steps_done(step);
      faults.hang_if_due(step, [&] { return note->newest(); });
      trace.begin_step(step);
      const StepStats st = s.trainer->step(step);
      liveness::set_steps_done(step + 1);
      val = validate_if_due(*s.trainer, s.config, step + 1);  // a collective
      if (s.lead())
        report_step(s, st, {step, start, max_steps}, checkpoint_ms, checkpoint_wait_ms,
                    options.json, metrics.get(), step_progress, run_clock, val);
      checkpoint_ms = save_if_due(s, step + 1, options.json, checkpoint_wait_ms,
                                  [&] { take_background_save(false); });
      trace.end_step(step);  // a save's spans belong to the step that made it
    }
    if (ckpt.async && !ckpt.dir.empty()) {
      s.trainer->settle_background_saves();  // the last one in flight, before the final save
      take_background_save(true);
    }
    if (!ckpt.dir.empty() && start < max_steps) save(s, max_steps);
    s.trainer->on_checkpoint_complete(nullptr);  // it refers to this scope's variables
    finish_run(s, trace, options.json, metrics.get(), val);
    return 0;
  });
}

}  // namespace st
