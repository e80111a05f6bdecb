// shardtrain: one program, subcommands train and bench. Exit codes: 0 success, 2 bad input
// (config, data, checkpoint, command line), 1 any other failure.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "core/error.hpp"
#include "launch/commands.hpp"

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

  CLI::App* bench = app.add_subcommand("bench", "benchmarks");
  bench->require_subcommand(1);
  CLI::App* bench_step = bench->add_subcommand("step", "time forward, backward and optimizer");
  add_common(bench_step, bench_options);
  bench_step->add_option("--warmup", step_options.warmup, "untimed steps first");
  bench_step->add_option("--steps", step_options.steps, "timed steps (the median is reported)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    if (train->parsed()) return st::run_train(train_options);
    if (bench_step->parsed()) return st::run_bench_step(bench_options, step_options);
  } catch (const st::InputError& e) {
    std::fflush(stdout);
    fmt::print(stderr, "shardtrain: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "shardtrain: failed: {}\n", e.what());
    return 1;
  }
  return 1;
}
