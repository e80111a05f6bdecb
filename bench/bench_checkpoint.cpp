#include "bench/bench_checkpoint.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/file_io.hpp"
#include "core/memory_stats.hpp"
#include "core/progress.hpp"
#include "core/stats.hpp"
#include "core/timer.hpp"
#include "launch/session.hpp"

namespace st {
namespace {

namespace fs = std::filesystem;

// The slowest rank's time for `fn`, with all ranks starting together.
template <class Fn>
double slowest_ms(ProcessGroup& g, Fn&& fn) {
  g.barrier()->wait();
  Timer t;
  fn();
  Tensor ms = Tensor::empty("bench.ms", {1}, DType::f64);
  ms.data<double>()[0] = t.ms();
  g.all_reduce(ms, {.op = ReduceOp::max})->wait();
  return ms.data<double>()[0];
}

// Every repeat's timings, for their medians.
struct CheckpointSamples {
  std::vector<double> save, load, plain, stall, background, overlapped_step, step_alone;
};

// The medians as JSON or a table (rank 0).
void print_checkpoint_result(const CommonOptions& options, const Session& s, int ranks, int repeats,
                             double bytes, const CheckpointSamples& m) {
  const double save_ms = median(m.save), load_ms = median(m.load), plain_ms = median(m.plain);
  const double stall_ms = median(m.stall), background_ms = median(m.background);
  const double overlapped_ms = median(m.overlapped_step), alone_ms = median(m.step_alone);
  auto gbps = [&](double ms) { return bytes / (ms / 1e3) / 1e9; };
  const nlohmann::json result = {
      {"config", options.config},
      {"ranks", ranks},
      {"bytes", bytes},
      {"save_ms", save_ms},
      {"load_ms", load_ms},
      {"write_ms", plain_ms},
      {"save_gbps", gbps(save_ms)},
      {"load_gbps", gbps(load_ms)},
      {"write_gbps", gbps(plain_ms)},
      {"save_vs_write", plain_ms / save_ms},
      {"async_stall_ms", stall_ms},
      {"async_background_ms", background_ms},
      {"async_stall_vs_save", stall_ms / save_ms},
      {"step_beside_writer_ms", overlapped_ms},
      {"step_alone_ms", alone_ms},
      {"staging_mib", double(s.trainer->budget().checkpoint_staging) / kMiB}};
  if (options.json) {
    fmt::print("{}\n", result.dump());
  } else {
    fmt::print(
        "bench checkpoint | config {} | {} rank{} | {:.1f} MiB | medians of {}\n"
        "  save  {:8.1f} ms  {:6.2f} GB/s  ({:.0f}% of plain write bandwidth)\n"
        "  load  {:8.1f} ms  {:6.2f} GB/s  (verify checksums + read own ranges)\n"
        "  write {:8.1f} ms  {:6.2f} GB/s  (the same bytes, plain write + fsync)\n"
        "  checkpoint.async: the loop stalls {:.1f} ms ({:.1f}% of the synchronous save; target "
        "<= 10%: the hand-over, and the next update's wait for the writer's copy into {:.1f} "
        "MiB of staging per rank); the writer takes {:.1f} ms in the background; the step "
        "beside it {:.1f} ms, one alone {:.1f} ms\n",
        options.config, ranks, ranks == 1 ? "" : "s", bytes / (1 << 20), repeats, save_ms,
        gbps(save_ms), 100 * plain_ms / save_ms, load_ms, gbps(load_ms), plain_ms, gbps(plain_ms),
        stall_ms, 100 * stall_ms / save_ms, double(s.trainer->budget().checkpoint_staging) / kMiB,
        background_ms, overlapped_ms, alone_ms);
  }
}

}  // namespace

int run_bench_checkpoint(const CommonOptions& options, int repeats, const std::string& dir) {
  if (repeats < 1) fail_input("bench checkpoint: --repeats must be >= 1");
  Session s = open_session(options, [&](Config& c) {
    c.checkpoint.dir = dir;
    c.checkpoint.keep = 1;
    c.checkpoint.async = true;  // the writer and its staging buffers exist for the async rows
  });
  return run_after_startup([&] {
    ProcessGroup& g = *s.ranks.group;
    s.start_services();                      // the heartbeat beside the saves, as in `train`
    if (g.rank() == 0) fs::remove_all(dir);  // an earlier run's checkpoints would count as newer
    g.barrier()->wait();
    s.trainer->step(0);  // optimizer state exists and is not all zeros
    CheckpointSamples m;
    auto& [save, load, plain, stall, background, overlapped_step, step_alone] = m;
    int64_t bytes_per_rank = 0;
    std::string path;
    Progress progress("bench checkpoint", repeats, s.lead());
    for (int r = 0; r < repeats; ++r) {
      progress.update(r, "save, load, plain write, background save, steps");
      save.push_back(slowest_ms(g, [&] { path = s.trainer->save_checkpoint(2 * r + 1); }));
      load.push_back(slowest_ms(g, [&] { s.trainer->load_checkpoint(path); }));
      // The same bytes per rank with plain write + fsync into the same file system.
      if (bytes_per_rank == 0)
        for (const ShardedState& state : s.trainer->checkpoint_states())
          bytes_per_rank +=
              int64_t(fs::file_size(fs::path(path) / checkpoint_file_name(state.name, g.rank())));
      std::vector<char> block(size_t(8) << 20, 'x');
      const std::string file = fmt::format("{}/plain.rank-{:05}.bin", dir, g.rank());
      plain.push_back(slowest_ms(g, [&] {
        OutputFile out(file);
        for (int64_t done = 0; done < bytes_per_rank; done += int64_t(block.size()))
          out.write(block.data(),
                    size_t(std::min<int64_t>(int64_t(block.size()), bytes_per_rank - done)));
        out.sync_and_close();
      }));
      fs::remove(file);
      // checkpoint.async: what it stalls the loop (the hand-over, then the update's wait for
      // the writer's copy in the step after), that step beside the writer, the writer's time,
      // and a step with no save (the interleaved baseline).
      const double handed = slowest_ms(g, [&] {
        if (!s.trainer->save_checkpoint_in_background(2 * r + 2).background)
          fail("bench checkpoint: the save ran synchronously");
      });
      double stage_wait = 0;
      overlapped_step.push_back(
          slowest_ms(g, [&] { stage_wait = s.trainer->step(1 + r).checkpoint_stage_wait_ms; }));
      Tensor wait = Tensor::empty("bench.stage_wait", {1}, DType::f64);
      wait.data<double>()[0] = stage_wait;
      g.all_reduce(wait, {.op = ReduceOp::max})->wait();
      stall.push_back(handed + wait.data<double>()[0]);
      double writer_s = 0;
      const auto done = s.trainer->finished_background_save(true, &writer_s);
      if (!done || done->outcome != BackgroundSave::Outcome::complete)
        fail("bench checkpoint: the background save did not complete{}",
             done ? ": " + done->message : std::string());
      background.push_back(writer_s * 1e3);
      step_alone.push_back(slowest_ms(g, [&] { s.trainer->step(1 + r); }));
    }
    progress.finish("done");
    Tensor total = Tensor::empty("bench.bytes", {1}, DType::i64);
    total.data<int64_t>()[0] = bytes_per_rank;
    g.all_reduce(total)->wait();
    const double bytes = double(total.data<int64_t>()[0]);
    if (g.rank() == 0) fs::remove_all(dir);
    s.stop_services();
    if (s.lead()) print_checkpoint_result(options, s, g.size(), repeats, bytes, m);
    return 0;
  });
}

}  // namespace st
