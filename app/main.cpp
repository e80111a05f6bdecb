// shardtrain: one program; subcommands train, eval, sample, export, tokenize, plot, bench,
// simulate and config. This file is the
// command table: it parses the command line and dispatches to launch/ and bench/.
// Exit codes: 0 success, 2 bad input (config, data, checkpoint, command line), 1 any other failure.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "api/rank_context.hpp"
#include "app/version.hpp"
#include "bench/bench_checkpoint.hpp"
#include "bench/bench_collectives.hpp"
#include "bench/bench_mesh.hpp"
#include "bench/bench_scaling.hpp"
#include "bench/bench_step.hpp"
#include "bench/calibrate.hpp"
#include "collectives/mpi_runtime.hpp"
#include "collectives/startup_deadline.hpp"
#include "core/error.hpp"
#include "core/file_io.hpp"
#include "launch/commands.hpp"
#include "launch/config.hpp"
#include "launch/interrupt.hpp"
#include "launch/names.hpp"
#include "launch/plot.hpp"
#include "launch/restart_decision.hpp"
#include "launch/simulate_command.hpp"

namespace {

// One subcommand: its CLI11 node and what runs it once it was parsed.
struct Command {
  CLI::App* cli;
  std::function<int()> run;
};

// Every command's options; they live as long as main.
struct Options {
  st::CommonOptions train, bench_step, bench_checkpoint;
  st::BenchStepOptions step;
  bool collectives_json = false;
  long long collectives_max_bytes = 256ll << 20;
  st::ScalingOptions scaling;
  st::MeshBenchOptions mesh;
  int checkpoint_repeats = 5;
  std::string checkpoint_dir = "/tmp/shardtrain-bench-checkpoint";
  st::ExportOptions export_;
  st::EvalOptions eval;
  st::SampleOptions sample;
  st::TokenizeOptions tokenize;
  std::vector<std::string> plot_files;
  std::string plot_out;
  st::SimulateOptions simulate;
  st::CalibrateOptions calibrate;
  st::CommonOptions config;
  bool config_list = false, config_markdown = false;
  st::RestartDecisionOptions restart;
};

// Names every bundled config, so the help cannot fall behind launch/configs/.
std::string config_option_help() {
  return fmt::format("TOML config file, or a bundled config name ({}; default tiny)",
                     fmt::join(st::bundled_config_names(), ", "));
}

void add_common(CLI::App* command, st::CommonOptions& options) {
  command->add_option("--config", options.config, config_option_help());
  command->add_flag("--json", options.json, "print JSON instead of text");
  command->add_option("overrides", options.overrides, "section.key=value overrides");
}

void add_train(CLI::App& app, Options& o, std::vector<Command>& table) {
  CLI::App* train = app.add_subcommand("train", "train a model");
  add_common(train, o.train);
  // A hidden test hook: checkpoint writes sleep after each unit so a test can kill a save.
  train->add_option("--test-slow-checkpoint-ms", o.train.test_slow_checkpoint_ms)->group("");
  train->add_option("--test-hang-at-step", o.train.test_hang_at_step)->group("");
  train->add_option("--test-peak-gflops", o.train.test_peak_gflops)->group("");
  table.push_back({train, [&o] { return st::run_train(o.train); }});
}

void add_bench(CLI::App& app, Options& o, std::vector<Command>& table) {
  CLI::App* bench = app.add_subcommand("bench", "benchmarks");
  bench->require_subcommand(1);

  CLI::App* step = bench->add_subcommand("step", "time forward, backward and optimizer");
  add_common(step, o.bench_step);
  step->add_option("--warmup", o.step.warmup, "untimed steps first");
  step->add_option("--steps", o.step.steps, "timed steps (the median is reported)");
  table.push_back({step, [&o] { return st::run_bench_step(o.bench_step, o.step); }});

  CLI::App* collectives = bench->add_subcommand(
      "collectives", "all-gather and reduce-scatter bandwidth (under mpirun)");
  collectives->add_flag("--json", o.collectives_json, "print JSON lines instead of a table");
  collectives->add_option("--max-bytes", o.collectives_max_bytes, "largest buffer (bytes)");
  table.push_back({collectives, [&o] {
                     st::mpi_init(nullptr, nullptr);
                     return st::run_bench_collectives(o.collectives_json, o.collectives_max_bytes);
                   }});

  st::ScalingOptions& s = o.scaling;
  CLI::App* scaling = bench->add_subcommand(
      "scaling", "tokens/s, exposed communication and memory at 1, 2 and 4 ranks (runs mpirun)");
  scaling->add_option("--config", s.config, "TOML config file or bundled name");
  scaling->add_flag("--json", s.json, "print JSON lines instead of a table");
  scaling->add_option("--ranks", s.ranks, "rank counts to run")
      ->delimiter(',')
      ->allow_extra_args(false);
  scaling->add_option("--steps", s.steps, "timed steps per run (median reported)");
  scaling->add_option("--warmup", s.warmup, "untimed steps first");
  scaling->add_option("--repeats", s.repeats, "runs per row (the median is reported)");
  scaling->add_option("overrides", s.overrides, "section.key=value overrides");
  table.push_back({scaling, [&o] { return st::run_bench_scaling(o.scaling); }});

  st::MeshBenchOptions& m = o.mesh;
  CLI::App* mesh = bench->add_subcommand(
      "mesh", "FSDP, HSDP and DDP on emulated hosts behind capped links (runs shardrun --nodes)");
  mesh->add_option("--config", m.config, "TOML config file or bundled name");
  mesh->add_flag("--json", m.json, "print JSON lines instead of a table");
  mesh->add_option("--gbit", m.gbit, "link caps in Gbit/s (0: uncapped)")
      ->delimiter(',')
      ->allow_extra_args(false);
  mesh->add_option("--ranks", m.ranks, "ranks in all");
  mesh->add_option("--nodes", m.nodes, "emulated hosts");
  mesh->add_option("--micro-batches", m.micro_batches, "micro-batches per step");
  mesh->add_option("--steps", m.steps, "timed steps per run (median reported)");
  mesh->add_option("--warmup", m.warmup, "untimed steps first");
  mesh->add_option("overrides", m.overrides, "section.key=value overrides");
  table.push_back({mesh, [&o] { return st::run_bench_mesh(o.mesh); }});

  CLI::App* checkpoint = bench->add_subcommand(
      "checkpoint", "checkpoint save and load bandwidth beside plain writes (under mpirun)");
  add_common(checkpoint, o.bench_checkpoint);
  checkpoint->add_option("--repeats", o.checkpoint_repeats, "saves and loads (median)");
  checkpoint->add_option("--dir", o.checkpoint_dir, "where to write (removed after)");
  table.push_back({checkpoint, [&o] {
                     return st::run_bench_checkpoint(o.bench_checkpoint, o.checkpoint_repeats,
                                                     o.checkpoint_dir);
                   }});
}

// export, eval and sample: the commands that load a trained model.
void add_model_commands(CLI::App& app, Options& o, std::vector<Command>& table) {
  CLI::App* export_cmd =
      app.add_subcommand("export", "a checkpoint as a safetensors file or a Hugging Face folder");
  export_cmd->add_option("--checkpoint", o.export_.checkpoint, "checkpoint directory");
  export_cmd->add_option("--out", o.export_.out,
                         "FILE.safetensors (with config.json beside it), or a model folder "
                         "Hugging Face's from_pretrained reads");
  export_cmd->add_option("--max-shard-size", o.export_.max_shard_size,
                         "a folder's files at most this large (5GB, 500MB, 64KiB; default 5GB)");
  export_cmd->add_option("--dtype", o.export_.dtype, "bf16 or fp32");
  export_cmd->add_flag("--overwrite", o.export_.overwrite,
                       "replace an existing --out (file or folder) whole, once the new one is "
                       "written; without it an existing output is refused");
  table.push_back({export_cmd, [&o] { return st::run_export(o.export_); }});

  CLI::App* eval = app.add_subcommand("eval", "validation loss of a trained model");
  add_common(eval, o.eval.common);
  eval->add_option("--weights", o.eval.weights, "safetensors file (config.json beside)");
  eval->add_option("--checkpoint", o.eval.checkpoint, "checkpoint directory");
  eval->add_option("--data", o.eval.data,
                   "text file: its validation split (default: the config's data)");
  eval->add_option("--tokens", o.eval.tokens,
                   "token file (llm.c's format or raw uint16), windows of seq_len + 1");
  table.push_back({eval, [&o] { return st::run_eval(o.eval); }});

  CLI::App* sample = app.add_subcommand("sample", "generate text from a trained model");
  sample->add_option("--checkpoint", o.sample.checkpoint, "checkpoint directory");
  sample->add_option("--weights", o.sample.weights, "safetensors file");
  sample->add_option("--prompt", o.sample.prompt, "text to continue");
  sample
      ->add_option("--prompt-tokens", o.sample.prompt_tokens, "token ids to continue: 15496,11,995")
      ->delimiter(',')
      ->allow_extra_args(false);
  sample->add_option("--vocab", o.sample.vocab,
                     "directory with GPT-2's encoder.json and vocab.bpe (encode and decode text)");
  sample->add_option("--tokens", o.sample.tokens, "tokens to generate");
  sample->add_option("--temperature", o.sample.temperature, "0: greedy");
  sample->add_option("--seed", o.sample.seed, "the same seed gives the same text");
  table.push_back({sample, [&o] { return st::run_sample(o.sample); }});

  st::TokenizeOptions& t = o.tokenize;
  CLI::App* tokenize = app.add_subcommand("tokenize", "text into an llm.c token file");
  tokenize->add_option("--in", t.in, "text file");
  tokenize->add_option("--out", t.out, "token file to write (llm.c format)");
  tokenize->add_option("--tokenizer", t.tokenizer,
                       "a Hugging Face tokenizer.json, or a model folder holding one");
  tokenize->add_option("--encoding", t.encoding, "bytes (the default) or gpt2");
  tokenize->add_option("--vocab", t.vocab, "directory with GPT-2's encoder.json and vocab.bpe");
  tokenize->add_flag("--sections", t.sections,
                     "split on blank lines; each section between the tokenizer's separators");
  tokenize->add_option("--val-tokens", t.val_tokens, "the first N tokens go to --val-out");
  tokenize->add_option("--val-out", t.val_out, "token file for the first --val-tokens tokens");
  table.push_back({tokenize, [&o] { return st::run_tokenize(o.tokenize); }});

  CLI::App* plot = app.add_subcommand(
      "plot", "loss, validation loss, tokens/s and memory against step, runs overlaid (gnuplot)");
  plot->add_option("metrics", o.plot_files, "metrics files (metrics.file's JSON lines)");
  plot->add_option("--out", o.plot_out, "FILE.png or FILE.svg");
  table.push_back({plot, [&o] { return st::run_plot(o.plot_files, o.plot_out); }});
}

// An unknown command word is named, with the closest command when one is near (a typo).
std::string unknown_command_message(const std::string& word, const CLI::App& app) {
  std::string best, all;
  size_t best_distance = 3;  // at most two edits away
  for (const CLI::App* sub : app.get_subcommands({})) {
    all += (all.empty() ? "" : ", ") + sub->get_name();
    const size_t d = st::edit_distance(word, sub->get_name());
    if (d < best_distance) best_distance = d, best = sub->get_name();
  }
  return fmt::format("unknown command '{}'{}; the commands are {}", word,
                     best.empty() ? "" : fmt::format(" (did you mean '{}'?)", best), all);
}

// Runs the parsed command; every failure becomes one message and an exit code, and under
// mpirun a failure on one rank ends every rank.
int run(const Command& command) {
  try {
    const int rc = command.run();
    st::flush_standard_output();
    st::mpi_finalize();
    return rc;
  } catch (const st::ExitQuietly& quiet) {
    // Every rank agreed on a start-up failure and one of them has reported it.
    st::mpi_finalize();
    return quiet.code;
  } catch (const st::InputError& e) {
    if (st::mpi_is_initialized() && st::mpi_world_size() > 1)
      st::abort_job(std::string("error: ") + e.what(), 2, st::FailureClass::bad_input);
    std::fflush(stdout);
    fmt::print(stderr, "shardtrain: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    // Under mpirun the other ranks may be waiting on this one: end them all.
    int error = 0;
    const st::FailureClass kind = st::classify_failure(e, error);
    if (st::mpi_is_initialized()) st::abort_job(std::string("failed: ") + e.what(), 1, kind, error);
    std::fflush(stdout);
    fmt::print(stderr, "shardtrain: failed: {}\n", e.what());
    return 1;
  }
}

// config: every key (--list, the reference docs/config.md is made from), or the values a
// --config file and overrides resolve to.
void add_config(CLI::App& app, Options& o, std::vector<Command>& table) {
  CLI::App* config = app.add_subcommand(
      "config", "list every config key, or print the values a config and overrides resolve to");
  config->add_option("--config", o.config.config, config_option_help());
  config->add_flag("--list", o.config_list, "every key: type, default, allowed values, meaning");
  config->add_flag("--markdown", o.config_markdown, "with --list: the Markdown page");
  config->add_option("overrides", o.config.overrides, "section.key=value overrides");
  table.push_back({config, [&o] {
                     if (o.config_markdown && !o.config_list)
                       st::fail_input("config: --markdown goes with --list");
                     if (o.config_list) {
                       fmt::print("{}", st::config_reference(o.config_markdown));
                       return 0;
                     }
                     for (const std::string& line :
                          st::describe_config(st::load_config(o.config.config, o.config.overrides)))
                       fmt::print("{}\n", line);
                     return 0;
                   }});
}

// `simulate --cluster this-machine`'s first run on a machine: `simulate calibrate --config tiny`
// into the cache it names (launch/ cannot reach bench/). SHARDTRAIN_QUICK_CALIBRATION=1, for
// tests: one sample of each kind, seconds rather than a minute or two (rougher numbers).
void calibrate_on_first_use(const std::vector<std::string>& overrides, const std::string& out) {
  st::CalibrateOptions c;
  c.common.overrides = overrides;
  c.out = out;
  c.report = stderr;  // stdout is the prediction's (--json)
  if (const char* quick = std::getenv("SHARDTRAIN_QUICK_CALIBRATION"); quick && *quick == '1') {
    c.ranks = {1};
    c.rows = {1};
    c.link_ranks = {2};
    c.steps = 1;
    c.max_bytes = 1 << 20;
  }
  st::run_calibrate(c);
}

void add_simulate(CLI::App& app, Options& o, std::vector<Command>& table) {
  CLI::App* sim = app.add_subcommand(
      "simulate", "predict step time, memory and scaling of a config on a cluster (SimGrid)");
  add_common(sim, o.simulate.common);
  sim->add_option("--cluster", o.simulate.cluster,
                  "cluster TOML, or a bundled one (launch/clusters: this-machine, ...)");
  sim->add_option("--ranks", o.simulate.ranks, "rank counts (default: the cluster's)")
      ->delimiter(',')
      ->allow_extra_args(false);
  sim->add_option("--mesh", o.simulate.meshes, "fsdp,hsdp,ddp (default) or config (the config's)")
      ->delimiter(',')
      ->allow_extra_args(false);
  sim->add_option("--plot", o.simulate.plot,
                  "tokens/s and exposed share against ranks; with --plan, tokens/s against "
                  "memory (.png|.svg)");
  sim->add_flag("--plan", o.simulate.plan,
                "search the layouts (TP, PP, data parallelism, schedule, micro-batches, "
                "checkpointing, hpZ, quantization) for the fastest that fit, at one rank count");
  sim->add_option("--top", o.simulate.top,
                  "with --plan: the layouts printed (0: every one that fits)");
  sim->add_option(
      "--max-ring-steps", o.simulate.max_ring_steps,
      "ring steps simulated message by message before the rest are extrapolated (0: all)");
  sim->add_option("--max-memory", o.simulate.max_memory_gib,
                  "GiB one simulation may take (its estimate is checked before it runs; "
                  "default: half of the available memory)");
  sim->add_flag("--all-nodes", o.simulate.every_node,
                "simulate every node (default: nodes that behave alike are simulated once)");

  CLI::App* cal = sim->add_subcommand("calibrate", "measure this machine for the simulator");
  add_common(cal, o.calibrate.common);
  cal->add_option("--out", o.calibrate.out, "the profile to write (JSON)")->required();
  cal->add_option("--ranks", o.calibrate.ranks, "ranks computing at once (threads: cores / ranks)")
      ->delimiter(',')
      ->allow_extra_args(false);
  cal->add_option("--rows", o.calibrate.rows, "sequences per rank to measure")
      ->delimiter(',')
      ->allow_extra_args(false);
  cal->add_option("--steps", o.calibrate.steps, "timed steps per measurement (median)");
  cal->add_option("--max-bytes", o.calibrate.max_bytes, "largest collective measured");
  cal->add_flag("--tcp", o.calibrate.tcp, "also TCP between emulated hosts (root: ip netns, tc)");
  cal->add_option("--link-gbit", o.calibrate.link_gbit, "capped TCP links to fit (with --tcp)")
      ->delimiter(',')
      ->allow_extra_args(false);
  // calibrate first: when it ran, its parent `simulate` counts as parsed too.
  cal->add_option("--link-ranks", o.calibrate.link_ranks, "ranks each link class is measured at")
      ->delimiter(',')
      ->allow_extra_args(false);
  cal->add_option("--links-from", o.calibrate.links_from,
                  "copy the link fits of this profile instead of measuring them");
  table.push_back({cal, [&o] { return st::run_calibrate(o.calibrate); }});
  o.simulate.calibrate_here = calibrate_on_first_use;
  table.push_back({sim, [&o] { return st::run_simulate(o.simulate); }});
}

// For launch/shardrun: whether a failed run is started again (launch/restart_decision.hpp).
void add_restart_decision(CLI::App& app, Options& o, std::vector<Command>& table) {
  st::RestartDecisionOptions& r = o.restart;
  CLI::App* cmd = app.add_subcommand("restart-decision", "shardrun's restart decision");
  cmd->group("");  // not for users
  cmd->add_option("--exit-code", r.exit_code)->required();
  cmd->add_option("--failures", r.failures, "the ranks' failure records")->required();
  cmd->add_option("--log", r.log, "the run's output")->required();
  cmd->add_option("--previous", r.previous, "the previous failed run's line");
  cmd->add_option("--save", r.save, "where this run's line goes");
  cmd->add_option("--attempt", r.limits.attempt)->required();
  cmd->add_option("--max-restarts", r.limits.max_restarts)->required();
  cmd->add_option("--available", r.limits.available)->required();
  cmd->add_option("--min-ranks", r.limits.min_ranks)->required();
  cmd->add_option("--world-sizes", r.world_sizes, "the world sizes the job can run at");
  table.push_back({cmd, [&o] { return st::run_restart_decision(o.restart); }});
}

}  // namespace

int main(int argc, char** argv) {
  // A file-size limit (ulimit -f) makes writes fail with EFBIG, reported with the file, instead
  // of killing the process before it can say so or remove its temporaries.
  std::signal(SIGXFSZ, SIG_IGN);
  st::install_startup_interrupt_handlers(argc > 1 && std::string(argv[1]) == "train");
  st::startup_timeout_from_arguments(argc, argv);  // bounds MPI's start-up, before any config
  CLI::App app{"shardtrain: FSDP-style sharded training on CPUs"};
  app.require_subcommand(1);
  Options options;
  std::vector<Command> table;
  add_train(app, options, table);
  add_bench(app, options, table);
  add_model_commands(app, options, table);
  add_simulate(app, options, table);
  add_config(app, options, table);
  add_restart_decision(app, options, table);
  app.set_version_flag(
      "--version", [] { return st::version_text(); },
      "the version, commit, compiler, oneDNN, MPI and CPU of this build");
  if (argc > 1 && argv[1][0] != '-') {
    const std::string word = argv[1];
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({})) known = known || sub->get_name() == word;
    if (!known) {
      fmt::print(stderr, "shardtrain: error: {}\n", unknown_command_message(word, app));
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    fmt::print(stderr, "shardtrain: error: {} (see shardtrain {}--help)\n", e.what(),
               argc > 1 && argv[1][0] != '-' ? std::string(argv[1]) + " " : std::string());
    return 2;
  }
  for (const Command& command : table)
    if (command.cli->parsed()) return run(command);
  return 1;
}
