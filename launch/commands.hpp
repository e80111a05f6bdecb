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
  // train's hidden test hook: the main thread blocks forever before this step (1-based), as
  // in a hung file read, while its heartbeat goes on (see collectives/heartbeat.hpp).
  int64_t test_hang_at_step = 0;
  // train's hidden test hook: the matmul peak start-up measures, in GFLOP/s over all ranks,
  // whatever it measured (a low one stands for a start-up slowed by other jobs).
  double test_peak_gflops = 0;
};

int run_train(const CommonOptions& options);

// shardtrain export --checkpoint DIR --out FILE [--dtype bf16|fp32]
struct ExportOptions {
  std::string checkpoint, out, dtype = "bf16";
  std::string max_shard_size;  // a folder's files at most this large; "" (not given): 5GB
  bool overwrite = false;      // replace an existing --out (and a one-file export's config.json)
};
int run_export(const ExportOptions& options);

// shardtrain eval --weights FILE | --checkpoint DIR, with --data FILE or --tokens FILE
struct EvalOptions {
  CommonOptions common;
  std::string weights, checkpoint, data, tokens;
};
int run_eval(const EvalOptions& options);

// shardtrain sample --checkpoint DIR --prompt TEXT|--prompt-tokens IDS [--vocab DIR] --tokens N
//                   --temperature T --seed S
struct SampleOptions {
  std::string checkpoint, weights, prompt;
  std::vector<int64_t> prompt_tokens;
  std::string vocab;  // GPT-2's encoder.json + vocab.bpe: encode the prompt, decode the sample
  int64_t tokens = 200;
  double temperature = 1.0;
  int64_t seed = 1;  // checked: >= 0
};
int run_sample(const SampleOptions& options);

// shardtrain tokenize --in FILE --out FILE.bin [--tokenizer PATH | --encoding bytes|gpt2
//                     --vocab DIR] [--sections] [--val-tokens N --val-out FILE.bin]
struct TokenizeOptions {
  std::string in, out, tokenizer, encoding, vocab, val_out;  // no --encoding: bytes
  bool sections = false;
  int64_t val_tokens = 0;
};
int run_tokenize(const TokenizeOptions& options);

// shardtrain plot METRICS.jsonl [...] --out FILE.png|FILE.svg (declared in launch/plot.hpp)

}  // namespace st
