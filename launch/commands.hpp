#pragma once
// The subcommands of the shardtrain program.
#include <string>
#include <vector>

namespace st {

struct CommonOptions {
  std::string config = "tiny";  // a path or a bundled config name
  std::vector<std::string> overrides;
  bool json = false;
  int test_slow_checkpoint_ms = 0;  // train's hidden test hook (see ShardedTrainer)
};

int run_train(const CommonOptions& options);

// shardtrain export --checkpoint DIR --out FILE [--dtype bf16|fp32]
struct ExportOptions {
  std::string checkpoint, out, dtype = "bf16";
};
int run_export(const ExportOptions& options);

// shardtrain eval --weights FILE | --checkpoint DIR, with --data FILE or --tokens FILE
struct EvalOptions {
  CommonOptions common;
  std::string weights, checkpoint, data, tokens;
};
int run_eval(const EvalOptions& options);

// shardtrain sample --checkpoint DIR --prompt TEXT --tokens N --temperature T --seed S
struct SampleOptions {
  std::string checkpoint, weights, prompt;
  int64_t tokens = 200;
  double temperature = 1.0;
  uint64_t seed = 1;
};
int run_sample(const SampleOptions& options);

}  // namespace st
