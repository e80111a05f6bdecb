// shardtrain: one program; subcommands train, eval, sample, export and bench.
// Exit codes: 0 success, 2 bad input (config, data, checkpoint, command line), 1 any other failure.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "bench/bench_checkpoint.hpp"
#include "bench/bench_collectives.hpp"
#include "bench/bench_scaling.hpp"
#include "bench/bench_step.hpp"
#include "collectives/mpi_runtime.hpp"
#include "core/error.hpp"
#include "launch/commands.hpp"
#include "launch/rank_context.hpp"

namespace {

void add_common(CLI::App* command, st::CommonOptions& options) {
  command->add_option("--config", options.config,
                      "TOML config file, or a bundled config name (tiny, small)");
  command->add_flag("--json", options.json, "print JSON instead of text");
  command->add_option("overrides", options.overrides, "section.key=value overrides");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"shardtrain: FSDP-style sharded training on CPUs"};
  app.require_subcommand(1);
  st::CommonOptions train_options, bench_options;
  st::BenchStepOptions step_options;

  CLI::App* train = app.add_subcommand("train", "train a model");
  add_common(train, train_options);
  // A hidden test hook: checkpoint writes sleep after each unit so a test can kill a save.
  train->add_option("--test-slow-checkpoint-ms", train_options.test_slow_checkpoint_ms)->group("");

  CLI::App* bench = app.add_subcommand("bench", "benchmarks");
  bench->require_subcommand(1);
  CLI::App* bench_step = bench->add_subcommand("step", "time forward, backward and optimizer");
  add_common(bench_step, bench_options);
  bench_step->add_option("--warmup", step_options.warmup, "untimed steps first");
  bench_step->add_option("--steps", step_options.steps, "timed steps (the median is reported)");
  bool collectives_json = false;
  long long collectives_max_bytes = 256ll << 20;
  CLI::App* bench_collectives = bench->add_subcommand(
      "collectives", "all-gather and reduce-scatter bandwidth (under mpirun)");
  bench_collectives->add_flag("--json", collectives_json, "print JSON lines instead of a table");
  bench_collectives->add_option("--max-bytes", collectives_max_bytes, "largest buffer (bytes)");

  st::ScalingOptions scaling;
  CLI::App* bench_scaling = bench->add_subcommand(
      "scaling", "tokens/s, exposed communication and memory at 1, 2 and 4 ranks (runs mpirun)");
  bench_scaling->add_option("--config", scaling.config, "TOML config file or bundled name");
  bench_scaling->add_flag("--json", scaling.json, "print JSON lines instead of a table");
  bench_scaling->add_option("--ranks", scaling.ranks, "rank counts to run")->delimiter(',');
  bench_scaling->add_option("--steps", scaling.steps, "timed steps per run (median reported)");
  bench_scaling->add_option("--warmup", scaling.warmup, "untimed steps first");
  bench_scaling->add_option("--repeats", scaling.repeats, "runs per row (the median is reported)");
  bench_scaling->add_option("overrides", scaling.overrides, "section.key=value overrides");

  st::CommonOptions checkpoint_bench_options;
  int checkpoint_repeats = 5;
  std::string checkpoint_bench_dir = "/tmp/shardtrain-bench-checkpoint";
  CLI::App* bench_checkpoint = bench->add_subcommand(
      "checkpoint", "checkpoint save and load bandwidth beside plain writes (under mpirun)");
  add_common(bench_checkpoint, checkpoint_bench_options);
  bench_checkpoint->add_option("--repeats", checkpoint_repeats, "saves and loads (median)");
  bench_checkpoint->add_option("--dir", checkpoint_bench_dir, "where to write (removed after)");

  st::ExportOptions export_options;
  CLI::App* export_cmd = app.add_subcommand("export", "a checkpoint as a safetensors file");
  export_cmd->add_option("--checkpoint", export_options.checkpoint, "checkpoint directory");
  export_cmd->add_option("--out", export_options.out, "safetensors file to write");
  export_cmd->add_option("--dtype", export_options.dtype, "bf16 or fp32");

  st::EvalOptions eval_options;
  CLI::App* eval_cmd = app.add_subcommand("eval", "validation loss of a trained model");
  add_common(eval_cmd, eval_options.common);
  eval_cmd->add_option("--weights", eval_options.weights, "safetensors file (config.json beside)");
  eval_cmd->add_option("--checkpoint", eval_options.checkpoint, "checkpoint directory");
  eval_cmd->add_option("--data", eval_options.data,
                       "text file: its validation split (default: the config's data)");
  eval_cmd->add_option("--tokens", eval_options.tokens,
                       "little-endian uint16 token ids, windows of seq_len + 1");

  st::SampleOptions sample_options;
  CLI::App* sample_cmd = app.add_subcommand("sample", "generate text from a trained model");
  sample_cmd->add_option("--checkpoint", sample_options.checkpoint, "checkpoint directory");
  sample_cmd->add_option("--weights", sample_options.weights, "safetensors file");
  sample_cmd->add_option("--prompt", sample_options.prompt, "text to continue");
  sample_cmd->add_option("--tokens", sample_options.tokens, "bytes to generate");
  sample_cmd->add_option("--temperature", sample_options.temperature, "0: greedy");
  sample_cmd->add_option("--seed", sample_options.seed, "the same seed gives the same text");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    int rc = -1;
    if (train->parsed()) rc = st::run_train(train_options);
    if (bench_step->parsed()) rc = st::run_bench_step(bench_options, step_options);
    if (export_cmd->parsed()) rc = st::run_export(export_options);
    if (bench_checkpoint->parsed())
      rc = st::run_bench_checkpoint(checkpoint_bench_options, checkpoint_repeats,
                                    checkpoint_bench_dir);
    if (eval_cmd->parsed()) rc = st::run_eval(eval_options);
    if (sample_cmd->parsed()) rc = st::run_sample(sample_options);
    if (rc >= 0) {
      st::mpi_finalize();
      return rc;
    }
    if (bench_scaling->parsed()) return st::run_bench_scaling(scaling);
    if (bench_collectives->parsed()) {
      st::mpi_init(&argc, &argv);
      const int rc = st::run_bench_collectives(collectives_json, collectives_max_bytes);
      st::mpi_finalize();
      return rc;
    }
  } catch (const st::ExitQuietly& quiet) {
    // Every rank agreed on a start-up failure and one of them has reported it.
    st::mpi_finalize();
    return quiet.code;
  } catch (const st::InputError& e) {
    if (st::mpi_is_initialized() && st::mpi_world_size() > 1)
      st::abort_job(std::string("error: ") + e.what(), 2);
    std::fflush(stdout);
    fmt::print(stderr, "shardtrain: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    // Under mpirun the other ranks may be waiting on this one: end them all.
    if (st::mpi_is_initialized()) st::abort_job(std::string("failed: ") + e.what());
    std::fflush(stdout);
    fmt::print(stderr, "shardtrain: failed: {}\n", e.what());
    return 1;
  }
  return 1;
}
