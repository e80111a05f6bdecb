#include "launch/config_schema.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <set>
#include <utility>

#include "core/data/tokenizer.hpp"
#include "core/error.hpp"
#include "launch/names.hpp"

namespace st {

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::integer:
      return "an integer";
    case Kind::number:
      return "a number";
    case Kind::string:
      return "a string";
    case Kind::boolean:
      return "true or false";
    case Kind::boolean_or_integer:
      return "true, false or an integer";
  }
  return "?";
}

namespace {

// Every number a key takes is finite: NaN or infinity is never a meaningful setting.
double finite(double v, const std::string& key) {
  if (!std::isfinite(v))
    fail_input("'{}' must be a finite number (in single precision where it is one), got {}", key,
               v);
  return v;
}

template <class T>
KeySpec int_key(T Config::*section, int64_t T::*field) {
  return {Kind::integer,
          [=](Config& c, const Value& v, const std::string&) {
            c.*section.*field = std::get<int64_t>(v);
          },
          [=](const Config& c) { return std::to_string(c.*section.*field); }};
}
template <class T>
KeySpec num_key(T Config::*section, double T::*field) {
  return {Kind::number,
          [=](Config& c, const Value& v, const std::string& key) {
            c.*section.*field = finite(std::get<double>(v), key);
          },
          [=](const Config& c) { return fmt::format("{}", c.*section.*field); }};
}
template <class T>
KeySpec float_key(T Config::*section, float T::*field) {
  return {Kind::number,
          [=](Config& c, const Value& v, const std::string& key) {
            c.*section.*field = float(finite(double(float(std::get<double>(v))), key));
          },
          [=](const Config& c) { return fmt::format("{}", c.*section.*field); }};
}
template <class T>
KeySpec str_key(T Config::*section, std::string T::*field) {
  return {Kind::string,
          [=](Config& c, const Value& v, const std::string&) {
            c.*section.*field = std::get<std::string>(v);
          },
          [=](const Config& c) { return fmt::format("\"{}\"", c.*section.*field); }};
}
template <class T>
KeySpec bool_key(T Config::*section, bool T::*field) {
  return {
      Kind::boolean,
      [=](Config& c, const Value& v, const std::string&) { c.*section.*field = std::get<bool>(v); },
      [=](const Config& c) { return std::string(c.*section.*field ? "true" : "false"); }};
}
// A key whose words name the values of an enum: `parse` reads a word, `name` writes one.
template <class T, class E, class Parse, class Name>
KeySpec enum_key(T Config::*section, E T::*field, Parse parse, Name name) {
  return {Kind::string,
          [=](Config& c, const Value& v, const std::string& key) {
            c.*section.*field = parse(std::get<std::string>(v), key);
          },
          [=](const Config& c) { return fmt::format("\"{}\"", name(c.*section.*field)); }};
}
template <class T>
KeySpec dtype_key(T Config::*section, DType T::*field) {
  return enum_key(section, field, parse_float_dtype, dtype_name);
}

// sharding.reshard_after_forward: true, false, or the size N of the group the backward
// gathers from (checked against the shard group where the mesh is known).
KeySpec reshard_key() {
  return {Kind::boolean_or_integer,
          [](Config& c, const Value& v, const std::string& key) {
            if (const bool* b = std::get_if<bool>(&v)) {
              c.sharding.reshard_after_forward = *b;
              c.sharding.reshard_to = 0;
              return;
            }
            const int64_t n = std::get<int64_t>(v);
            if (n < 2)
              fail_input(
                  "'{}' = {} must be true, false, or a group size N >= 2 dividing the shard "
                  "group (false keeps whole units; true frees them)",
                  key, n);
            c.sharding.reshard_after_forward = true;
            c.sharding.reshard_to = n;
          },
          [](const Config& c) {
            if (c.sharding.reshard_to) return std::to_string(c.sharding.reshard_to);
            return std::string(c.sharding.reshard_after_forward ? "true" : "false");
          }};
}

PipeSchedule parse_pp_schedule(const std::string& word, const std::string& key) {
  PipeSchedule s;
  if (!parse_pipe_schedule(word, &s))
    fail_input("'{}' = \"{}\": the schedules are gpipe, 1f1b, interleaved_1f1b, zero_bubble", key,
               word);
  return s;
}

std::vector<int> parse_pp_layers(const std::string& text, const std::string& key) {
  std::vector<int> layers;
  size_t at = 0;
  while (at < text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    int64_t n = 0;
    const bool digits =
        !item.empty() && item.size() <= 9 &&
        std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits) n = std::stoll(item);
    if (!digits || n < 1)
      fail_input(
          "'{}' = \"{}\": \"{}\" is not a positive block count (a comma-separated list "
          "such as \"3,3,2\", one count per stage)",
          key, text, item);
    layers.push_back(int(n));
    at = comma + 1;
  }
  return layers;
}

std::string pp_layers_name(const std::vector<int>& layers) {
  std::string out;
  for (int n : layers) {
    if (!out.empty()) out += ',';
    out += std::to_string(n);
  }
  return out;
}

ResumeFrom parse_resume(const std::string& word, const std::string& key) {
  if (word.empty())
    fail_input("'{}' is empty: it must be auto, never, or a checkpoint directory", key);
  return ResumeFrom(word);
}

using ModelSection = ModelConfig;
using Data = decltype(Config::data);
using Training = decltype(Config::training);
using Schedule = decltype(Config::schedule);
using Precision = decltype(Config::precision);
using Sharding = decltype(Config::sharding);
using Checkpoint = decltype(Config::checkpoint);
using Metrics = decltype(Config::metrics);

// The keys by section, each with what the reference documents (one table per section keeps
// each function short; registry() merges them).
using KeyTable = std::vector<std::pair<std::string, KeyEntry>>;

KeyTable common_model_keys() {
  return {
      {"model.n_layer",
       {int_key(&Config::model, &ModelSection::n_layer), "1 – 65536", "transformer blocks"}},
      {"model.n_embd",
       {int_key(&Config::model, &ModelSection::n_embd), "1 – 131072, divisible by `model.n_head`",
        "channels C"}},
      {"model.n_head",
       {int_key(&Config::model, &ModelSection::n_head), "1 – 131072", "attention heads"}},
      {"model.block_size",
       {int_key(&Config::model, &ModelSection::block_size), "1 – 1048576",
        "context length (rows of `wpe`)"}},
      {"model.vocab_size",
       {int_key(&Config::model, &ModelSection::vocab_size), "1 – 16777216",
        "vocabulary (GPT-2's is 50,257); byte data (`data.path`, the built-in corpus) needs at "
        "least 256"}},
      {"model.padded_vocab_size",
       {int_key(&Config::model, &ModelSection::padded_vocab_size),
        "0, or `model.vocab_size` – 16777216",
        "rows of `wte` and columns of the logits; 0: `vocab_size` rounded up to a multiple of 128 "
        "(50,257 → 50,304); padding never reaches the loss, a sample or an export"}},
  };
}

// A family's own key: kept by name in ModelConfig::own as its default's type; shows the value
// in effect.
KeySpec own_key(const ModelFamily& family, const OwnKey& k) {
  const Kind kind = std::visit(
      [](auto v) {
        using T = decltype(v);
        return std::is_same_v<T, int64_t>  ? Kind::integer
               : std::is_same_v<T, double> ? Kind::number
                                           : Kind::boolean;
      },
      k.default_value);
  const std::string key = k.key;
  return {kind,
          [=](Config& c, const Value& v, const std::string& name) {
            if (kind == Kind::integer) c.model.own[key] = std::get<int64_t>(v);
            if (kind == Kind::number) c.model.own[key] = finite(std::get<double>(v), name);
            if (kind == Kind::boolean) c.model.own[key] = std::get<bool>(v);
          },
          [&family, key](const Config& c) {
            return std::visit(
                [](auto v) {
                  if constexpr (std::is_same_v<decltype(v), bool>)
                    return std::string(v ? "true" : "false");
                  else
                    return fmt::format("{}", v);
                },
                family.own_value(c.model, key));
          }};
}

// The keys every family reads, then each family's own (models/NAME/family.cpp), documented
// as that family's only. Called once (registry() keeps the table).
KeyTable model_keys() {
  static std::deque<std::string> text;  // the reference's strings, alive as long as the table
  std::vector<std::string> names, what;
  for (const ModelFamily* f : model_families()) {
    names.push_back(f->name);
    what.push_back(fmt::format("`{}`: {}", f->name, f->description));
  }
  KeyTable keys = common_model_keys();
  const std::string& allowed = text.emplace_back(fmt::format("{}", fmt::join(names, ", ")));
  const std::string& meaning =
      text.emplace_back(fmt::format("the architecture: {}", fmt::join(what, "; ")));
  keys.push_back(
      {"model.family",
       {str_key(&Config::model, &ModelSection::family), allowed.c_str(), meaning.c_str()}});
  // A key families share (Llama's, read by qwen2 and qwen3 too) is listed once, naming them.
  std::set<std::string> listed;
  for (const ModelFamily* f : model_families())
    for (const OwnKey& k : f->own_keys) {
      if (!listed.insert(k.key).second) continue;
      const std::string owners = family_names(model_families_owning(k.key));
      keys.push_back({k.key,
                      {own_key(*f, k), k.allowed.c_str(),
                       text.emplace_back(fmt::format("{} only: {}", owners, k.meaning)).c_str()}});
    }
  return keys;
}

KeyTable data_keys() {
  return {
      {"data.path",
       {str_key(&Config::data, &Data::path), "a file path",
        "a text file whose bytes are the tokens; empty (and no `data.tokens`): the built-in "
        "generated corpus"}},
      {"data.tokenizer",
       {str_key(&Config::data, &Data::tokenizer), "a file or folder path",
        "a Hugging Face `tokenizer.json` (or a model folder holding one) that tokenizes "
        "`data.path`; empty: its bytes are the tokens (with `training.init_from` a folder holding "
        "a tokenizer.json: that one)"}},
      {"data.val_fraction",
       {num_key(&Config::data, &Data::val_fraction), "0 ≤ x < 1",
        "the last fraction of the data is the validation split"}},
      {"data.tokens",
       {str_key(&Config::data, &Data::tokens), "a path or glob",
        "token file(s) (`shards/train_*.bin`, sorted, read as one stream), read where sampled"}},
      {"data.val_tokens",
       {str_key(&Config::data, &Data::val_tokens), "a path or glob",
        "validation token file(s); empty: the last `data.val_fraction` of `data.tokens`"}},
      {"data.token_format",
       {enum_key(&Config::data, &Data::token_format, parse_token_format, token_format_name),
        "auto, llmc, u16, u32",
        "`llmc` (llm.c's header, then uint16 tokens (magic 20240520, GPT-2's) or uint32 (magic "
        "20240801, Llama 3's)), `u16`/`u32` (raw little-endian ids), `auto` (llmc when the file "
        "starts with either magic, else u16)"}},
  };
}

KeyTable training_keys() {
  return {
      {"training.max_steps",
       {int_key(&Config::training, &Training::max_steps), "≥ 0", "optimizer steps"}},
      {"training.global_batch",
       {int_key(&Config::training, &Training::global_batch),
        "1 – 16777216, a multiple of ranks × `micro_batches`",
        "sequences per step, all ranks together"}},
      {"training.micro_batches",
       {int_key(&Config::training, &Training::micro_batches), "1 – 16777216",
        "gradient-accumulation micro-batches per step"}},
      {"training.seq_len",
       {int_key(&Config::training, &Training::seq_len), "1 – `model.block_size`",
        "tokens per sequence"}},
      {"training.seed",
       {int_key(&Config::training, &Training::seed), "≥ 0", "initial weights and data order"}},
      {"training.grad_clip",
       {num_key(&Config::training, &Training::grad_clip), "≥ 0",
        "clip by the global gradient norm; 0 disables"}},
      {"training.threads",
       {int_key(&Config::training, &Training::threads), "0 – 1024",
        "OpenMP threads per rank; 0: cores / ranks on the node"}},
      {"training.stall_timeout",
       {num_key(&Config::training, &Training::stall_timeout), "0 – 86400 (seconds)",
        "a rank that sends no heartbeat, or stays outside every collective without progress while "
        "the others wait, this long ends the job, named with its step; 0: off (the collectives' "
        "300 s watchdog remains)"}},
      {"training.startup_timeout",
       {num_key(&Config::training, &Training::startup_timeout), "0 – 86400 (seconds)",
        "a rank not through MPI's start-up, or the ranks' first agreement, this long ends the "
        "job naming the stage (Open MPI can hang in its start-up when many jobs start at once "
        "on one host); on the command line it bounds MPI's start-up too; 0: off"}},
      {"training.eval_every",
       {int_key(&Config::training, &Training::eval_every), "≥ 0",
        "validate every this many steps (on the step line and in `metrics.file`); 0: only "
        "after the last step"}},
      {"training.eval_tokens",
       {int_key(&Config::training, &Training::eval_tokens), "≥ 0",
        "validation tokens each `eval_every` validation scores, rounded up to whole windows of "
        "`seq_len` (at most the split); 0: the final validation's, the first 64 windows"}},
      {"training.init_from",
       {str_key(&Config::training, &Training::init_from), "a safetensors file or model folder",
        "start from these weights (shapes checked by name) instead of the seed's: one file, or a "
        "Hugging Face folder (model.safetensors, or an index and its shards)"}},
  };
}

KeyTable optimizer_keys() {
  return {
      {"optimizer.name",
       {enum_key(&Config::optimizer, &OptimizerConfig::kind, parse_optimizer, optimizer_name),
        "adamw, sgd", "AdamW, or SGD with momentum `beta1`"}},
      {"optimizer.lr", {num_key(&Config::schedule, &Schedule::lr), "> 0", "peak learning rate"}},
      {"optimizer.beta1",
       {float_key(&Config::optimizer, &OptimizerConfig::beta1), "0 ≤ x < 1",
        "first-moment decay (SGD: momentum)"}},
      {"optimizer.beta2",
       {float_key(&Config::optimizer, &OptimizerConfig::beta2), "0 ≤ x < 1",
        "second-moment decay"}},
      {"optimizer.eps",
       {float_key(&Config::optimizer, &OptimizerConfig::eps), "> 0", "AdamW's epsilon"}},
      {"optimizer.weight_decay",
       {float_key(&Config::optimizer, &OptimizerConfig::weight_decay), "≥ 0",
        "decoupled weight decay, on the matmul weights only (not biases, norms, embeddings)"}},
      {"optimizer.warmup_steps",
       {int_key(&Config::schedule, &Schedule::warmup_steps), "≥ 0",
        "steps of linear warm-up from `lr` / `warmup_steps` to `lr`, then `optimizer.schedule`"}},
      {"optimizer.min_lr",
       {num_key(&Config::schedule, &Schedule::min_lr), "0 – `optimizer.lr`",
        "where the decay ends, at `training.max_steps` (`constant` does not use it)"}},
      {"optimizer.schedule",
       {enum_key(&Config::schedule, &Schedule::kind, parse_schedule_kind, schedule_kind_name),
        "cosine, linear, constant, wsd",
        "the learning rate after the warm-up: `cosine` or `linear` decay to `min_lr` at "
        "`max_steps`, `constant` (stays at `lr`), or `wsd` (warmup-stable-decay): `lr` until the "
        "last `decay_fraction` of the steps, then `decay_shape` down to `min_lr`"}},
      {"optimizer.decay_fraction",
       {num_key(&Config::schedule, &Schedule::decay_fraction), "0 < x ≤ 1",
        "`wsd`: the fraction of `training.max_steps` spent decaying, at the end (rounded to whole "
        "steps, at least one, never into the warm-up)"}},
      {"optimizer.decay_shape",
       {enum_key(&Config::schedule, &Schedule::decay_shape, parse_decay_shape, decay_shape_name),
        "linear, cosine, sqrt",
        "`wsd`: how the decay falls with its progress p: 1 − p, (1 + cos πp) / 2, or 1 − √p "
        "(MiniCPM's and SmolLM's)"}},
  };
}

KeyTable precision_keys() {
  return {
      {"precision.param_dtype",
       {dtype_key(&Config::precision, &Precision::param_dtype), "bf16, fp32",
        "dtype parameters are gathered in and matmuls compute in"}},
      {"precision.reduce_dtype",
       {dtype_key(&Config::precision, &Precision::reduce_dtype), "fp32",
        "gradient dtype of the reduce-scatter (bf16 is refused)"}},
      {"precision.output_dtype",
       {dtype_key(&Config::precision, &Precision::output_dtype), "fp32", "logits dtype"}},
      {"precision.bf16_matmul",
       {enum_key(&Config::precision, &Precision::bf16_matmul, parse_bf16_matmul_path,
                 bf16_matmul_path_name),
        "auto, native, widened",
        "how BF16 matmuls run: `native` oneDNN BF16 (needs AVX512-core, else exit 2), `widened` "
        "BF16 inputs widened to FP32 in shardtrain's packed GEMM with FP32 accumulation, `auto` "
        "native with AVX512-BF16 or AMX, widened elsewhere"}},
      {"precision.fp32_matmul",
       {enum_key(&Config::precision, &Precision::fp32_matmul, parse_fp32_matmul_engine,
                 fp32_matmul_engine_name),
        "auto, onednn, packed",
        "the FP32 matmul: oneDNN's, shardtrain's packed GEMM, or `auto` (packed on AVX2 + FMA CPUs "
        "without AVX-512, oneDNN elsewhere)"}},
  };
}

KeyTable sharding_keys() {
  return {
      {"sharding.reshard_after_forward",
       {reshard_key(), "true, false, or N: a divisor of the shard group, 2 – half of it",
        "free each block's gathered parameters after its forward (ZeRO-3); false keeps them for "
        "its backward (ZeRO-2); N keeps a 1/N slice so the backward all-gathers within groups "
        "of N consecutive ranks, e.g. a node's (hpZ: +2·P/N bytes per rank in BF16)"}},
      {"sharding.gather_quantization",
       {enum_key(&Config::sharding, &Sharding::gather_quantization, parse_gather_quantization,
                 quantization_name),
        "none, int8",
        "all-gathers that cross nodes carry blockwise INT8 (a scale per 256 values, about half "
        "of BF16's bytes), decoded to param_dtype on arrival; FP32 masters untouched (qwZ)"}},
      {"sharding.reduce_quantization",
       {enum_key(&Config::sharding, &Sharding::reduce_quantization, parse_reduce_quantization,
                 quantization_name),
        "none, int8, int4",
        "gradients summed in FP32 within each node, then across nodes as blockwise INT8/INT4 "
        "with FP32 accumulation (qgZ); HSDP's replica all-reduce too"}},
      {"sharding.prefetch",
       {int_key(&Config::sharding, &Sharding::prefetch), "0 – 8",
        "units whose all-gather is in flight ahead of the one computing"}},
      {"sharding.accumulation",
       {enum_key(&Config::sharding, &Sharding::accumulation, parse_accumulation, accumulation_name),
        "reduce_each, reduce_last",
        "with micro-batches: reduce-scatter every micro-batch (least memory) or keep unsharded "
        "FP32 gradients and reduce-scatter once (least communication)"}},
      {"sharding.collective_algorithm",
       {enum_key(&Config::sharding, &Sharding::collective_algorithm, parse_algorithm,
                 algorithm_name),
        "auto, mpi, ring, shm", "the all-gather and reduce-scatter implementation"}},
      {"sharding.symmetric_memory",
       {bool_key(&Config::sharding, &Sharding::symmetric_memory), "true, false",
        "FSDP's unsharded parameters and gradients, the gradient shards that replicas on one "
        "node all-reduce, and TP's activations that its collectives read, in shared memory, "
        "where a node's all-gathers, reduce-scatters and FP32 all-reduces read them in place: "
        "one copy a byte (false: staged through a window, or MPI)"}},
      {"sharding.replica_sync",
       {enum_key(&Config::sharding, &Sharding::replica_sync, parse_replica_sync, replica_sync_name),
        "each, last",
        "with micro-batches and replicas: all-reduce across replicas after every micro-batch, or "
        "once after the last"}},
      {"sharding.ranks_per_node",
       {int_key(&Config::sharding, &Sharding::ranks_per_node), "≥ 0, dividing the world size",
        "0: detect nodes (ranks sharing memory); K: ranks r / K share a node"}},
      {"sharding.allow_cross_node_shard",
       {bool_key(&Config::sharding, &Sharding::allow_cross_node_shard), "true, false",
        "allow shard groups that straddle nodes while `parallel.dp_replicate` > 1"}},
      {"sharding.activation_checkpointing",
       {enum_key(&Config::sharding, &Sharding::activation_checkpointing,
                 parse_activation_checkpointing, activation_checkpointing_name),
        "none, selective, full",
        "what a micro-batch keeps for its backward: everything; matmul outputs and the residual "
        "stream; or each block's input only"}},
  };
}

using Parallel = decltype(Config::parallel);

KeyTable parallel_keys() {
  return {
      {"parallel.dp_shard",
       {int_key(&Config::parallel, &Parallel::dp_shard), "≥ 1, or -1 (the rest)",
        "ranks that shard one copy of the parameters (consecutive ranks, ideally one node); "
        "dp_shard × dp_replicate × tp × pp = world size"}},
      {"parallel.dp_replicate",
       {int_key(&Config::parallel, &Parallel::dp_replicate), "≥ 1, or -1 (the rest)",
        "copies that all-reduce their gradient shards (1: FSDP; with dp_shard 1: DDP; between: "
        "HSDP)"}},
      {"parallel.tp",
       {int_key(&Config::parallel, &Parallel::tp), "≥ 1 dividing the heads, or -1 (the rest)",
        "tensor-parallel ranks (the innermost dimension: consecutive ranks, ideally one node) "
        "that split each block's matmuls, heads and vocabulary by Megatron's layout"}},
      {"parallel.pp",
       {int_key(&Config::parallel, &Parallel::pp), "≥ 1, or -1 (the rest)",
        "pipeline ranks (the outermost dimension): each holds a contiguous run of blocks per "
        "virtual stage (the embedding on the first stage, the head on the last) and passes "
        "activations and their gradients to its neighbours"}},
      {"parallel.pp_schedule",
       {enum_key(&Config::parallel, &Parallel::pp_schedule, parse_pp_schedule, pipe_schedule_name),
        "gpipe, 1f1b, interleaved_1f1b, zero_bubble",
        "the order of each pipeline rank's forwards and backwards (docs/parallelism.md has "
        "each one's bubble); interleaved_1f1b needs pp_virtual_stages ≥ 2 and "
        "training.micro_batches a multiple of pp"}},
      {"parallel.pp_virtual_stages",
       {int_key(&Config::parallel, &Parallel::pp_virtual_stages), "≥ 1",
        "stages per pipeline rank (interleaved_1f1b: rank r holds stages r, r + pp, ...)"}},
      {"parallel.pp_boundary_dtype",
       {dtype_key(&Config::parallel, &Parallel::pp_boundary_dtype), "fp32, bf16",
        "what each micro-batch's residual stream and its gradient cross between stages in: "
        "fp32, the stream's own (the precision contract), or bf16 for half the bytes at one "
        "more rounding per boundary (measured: losses 0.3-0.5% from one rank's)"}},
      {"parallel.pp_layers",
       {enum_key(&Config::parallel, &Parallel::pp_layers, parse_pp_layers, pp_layers_name),
        "blocks per stage, e.g. \"3,3,2\"; empty: balanced",
        "pp × pp_virtual_stages counts summing to model.n_layer; empty: the blocks' FLOPs "
        "balanced, the embedding's and head's counted on the end stages"}},
      {"parallel.sequence_parallel",
       {bool_key(&Config::parallel, &Parallel::sequence_parallel), "true, false",
        "with tp > 1: the residual stream, norms and residual adds hold each TP rank's 1/tp of the "
        "micro-batch's tokens (all-gather before each column-parallel block, reduce-scatter "
        "after each row-parallel one); training.seq_len must divide by tp"}},
      {"parallel.allow_cross_node_tp",
       {bool_key(&Config::parallel, &Parallel::allow_cross_node_tp), "true, false",
        "allow TP groups that straddle nodes (every block's activations would cross the slow "
        "link four times a micro-batch)"}},
  };
}

KeyTable outputs_keys() {
  return {
      {"checkpoint.dir",
       {str_key(&Config::checkpoint, &Checkpoint::dir), "a directory path",
        "where checkpoints go (`DIR/step-NNNNNNNN`); empty: none"}},
      {"checkpoint.every",
       {int_key(&Config::checkpoint, &Checkpoint::every), "≥ 0",
        "save every this many steps (0: only at the end); the last step saves whenever `dir` is "
        "set"}},
      {"checkpoint.keep",
       {int_key(&Config::checkpoint, &Checkpoint::keep), "≥ 1",
        "complete checkpoints kept; older ones go after a save completes"}},
      {"checkpoint.resume",
       {enum_key(&Config::checkpoint, &Checkpoint::resume, parse_resume,
                 [](const ResumeFrom& r) { return r.name(); }),
        "auto, never, or a path",
        "`auto`: the newest complete checkpoint in `dir`, if any; `never`; or a checkpoint "
        "directory"}},
      {"checkpoint.async",
       {bool_key(&Config::checkpoint, &Checkpoint::async), "true, false",
        "save in the background: the step copies the shards to a staging buffer (in the memory "
        "budget) and trains on while a thread writes them; the checkpoint is complete once every "
        "rank's files are durable, agreed over a group of its own"}},
      {"checkpoint.async_timeout",
       {num_key(&Config::checkpoint, &Checkpoint::async_timeout), "1 – 86400 (seconds)",
        "a background save not complete after this long is given up (its temporaries removed, "
        "the previous checkpoint kept) and later saves are synchronous; training goes on"}},
      {"metrics.file",
       {str_key(&Config::metrics, &Metrics::file), "a file path",
        "JSON lines: one object per step, and records of each validation (`val_loss`), restart "
        "and the services' cost"}},
      {"metrics.log_every",
       {int_key(&Config::metrics, &Metrics::log_every), "≥ 1",
        "print the step line every this many steps (and the last, and any with a validation); "
        "`metrics.file` keeps every step"}},
      {"metrics.trace",
       {str_key(&Config::metrics, &Metrics::trace), "a file path",
        "a merged Chrome trace-event timeline of every rank"}},
      {"metrics.trace_steps",
       {enum_key(
            &Config::metrics, &Metrics::trace_steps,
            [](const std::string& text, const std::string&) { return StepRange(text); },
            [](const StepRange& r) { return r.name(); }),
        "FIRST..LAST", "1-based steps to trace; empty: every step"}},
  };
}

}  // namespace

const std::map<std::string, KeyEntry>& registry() {
  static const std::map<std::string, KeyEntry> keys = [] {
    std::map<std::string, KeyEntry> all;
    for (KeyTable (*table)() : {model_keys, data_keys, training_keys, optimizer_keys,
                                precision_keys, parallel_keys, sharding_keys, outputs_keys})
      for (auto& [key, entry] : table()) all.emplace(key, std::move(entry));
    return all;
  }();
  return keys;
}

const std::vector<std::pair<std::string, std::string>>& renamed_keys() {
  static const std::vector<std::pair<std::string, std::string>> renamed = {
      {"sharding.shard_degree", "parallel.dp_shard"},
      {"sharding.replicate_degree", "parallel.dp_replicate"}};
  return renamed;
}

const KeySpec& set_key(Config& config, const std::string& key, const std::string& where,
                       const std::function<Value(Kind, const std::string&)>& value) {
  for (const auto& [old_name, new_name] : renamed_keys())
    if (key == old_name) {
      const std::string note = old_name + " -> " + new_name;
      if (std::find(config.renamed_keys.begin(), config.renamed_keys.end(), note) ==
          config.renamed_keys.end())
        config.renamed_keys.push_back(note);
      return set_key(config, new_name, where, value);
    }
  const KeySpec& spec = find_key(key, where);
  spec.set(config, value(spec.kind, key), key);
  return spec;
}

const KeySpec& find_key(const std::string& key, const std::string& where) {
  auto it = registry().find(key);
  if (it != registry().end()) return it->second.spec;
  const std::string suggestion = closest_key(key);
  fail_input("{}: unknown config key '{}'{}", where, key,
             suggestion.empty() ? std::string("; `shardtrain config --list` lists every key")
                                : fmt::format("; did you mean '{}'?", suggestion));
}

std::vector<std::string> config_keys() {
  std::vector<std::string> keys;
  for (const auto& [k, _] : registry()) keys.push_back(k);
  return keys;
}

}  // namespace st
