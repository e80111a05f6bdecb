#include "launch/config.hpp"

#include "launch/trace_session.hpp"

#include <fmt/format.h>

#include <toml++/toml.h>
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>
#include <string_view>
#include <utility>
#include <variant>

#include "core/data/tokenizer.hpp"
#include "core/error.hpp"
#include "core/file_io.hpp"
#include "launch/bundled_configs.hpp"
#include "launch/names.hpp"

namespace st {
namespace {

using Value = std::variant<int64_t, double, std::string, bool>;
enum class Kind { integer, number, string, boolean };

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
  }
  return "?";
}

struct KeySpec {
  Kind kind;
  std::function<void(Config&, const Value&, const std::string& key)> set;
  std::function<std::string(const Config&)> show;
};

// A key as the reference documents it (`shardtrain config --list`, docs/config.md): the
// values validate_config accepts and a one-line meaning.
struct KeyEntry {
  KeySpec spec;
  const char* allowed;
  const char* meaning;
};

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

ResumeFrom parse_resume(const std::string& word, const std::string& key) {
  if (word.empty())
    fail_input("'{}' is empty: it must be auto, never, or a checkpoint directory", key);
  return ResumeFrom(word);
}

using Model = ModelConfig;
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
       {int_key(&Config::model, &Model::n_layer), "1 – 65536", "transformer blocks"}},
      {"model.n_embd",
       {int_key(&Config::model, &Model::n_embd), "1 – 131072, divisible by `model.n_head`",
        "channels C"}},
      {"model.n_head", {int_key(&Config::model, &Model::n_head), "1 – 131072", "attention heads"}},
      {"model.block_size",
       {int_key(&Config::model, &Model::block_size), "1 – 1048576",
        "context length (rows of `wpe`)"}},
      {"model.vocab_size",
       {int_key(&Config::model, &Model::vocab_size), "1 – 16777216",
        "vocabulary (GPT-2's is 50,257); byte data (`data.path`, the built-in corpus) needs at "
        "least 256"}},
      {"model.padded_vocab_size",
       {int_key(&Config::model, &Model::padded_vocab_size), "0, or `model.vocab_size` – 16777216",
        "rows of `wte` and columns of the logits; 0: `vocab_size` rounded up to a multiple of 128 "
        "(50,257 → 50,304); padding never reaches the loss, a sample or an export"}},
  };
}

// The keys every family reads, then each family's own (launch/families/NAME.cpp), documented
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
  keys.push_back({"model.family",
                  {str_key(&Config::model, &Model::family), allowed.c_str(), meaning.c_str()}});
  for (const ModelFamily* f : model_families())
    for (const FamilyKey& k : f->own_keys) {
      const KeySpec spec = std::visit(
          [](auto field) {
            using T = std::remove_cvref_t<decltype(ModelConfig{}.*field)>;
            if constexpr (std::is_same_v<T, int64_t>)
              return int_key(&Config::model, field);
            else if constexpr (std::is_same_v<T, double>)
              return num_key(&Config::model, field);
            else
              return bool_key(&Config::model, field);
          },
          k.field);
      keys.push_back({k.key,
                      {spec, k.allowed,
                       text.emplace_back(fmt::format("{} only: {}", f->name, k.meaning)).c_str()}});
    }
  return keys;
}

KeyTable data_keys() {
  return {
      {"data.path",
       {str_key(&Config::data, &Data::path), "a file path",
        "a text file whose bytes are the tokens; empty (and no `data.tokens`): the built-in "
        "generated corpus"}},
      {"data.val_fraction",
       {num_key(&Config::data, &Data::val_fraction), "0 ≤ x < 1",
        "the last fraction of the data is the validation split"}},
      {"data.tokens",
       {str_key(&Config::data, &Data::tokens), "a path or glob",
        "token file(s) (`shards/train_*.bin`, sorted, read as one stream), memory-mapped"}},
      {"data.val_tokens",
       {str_key(&Config::data, &Data::val_tokens), "a path or glob",
        "validation token file(s); empty: the last `data.val_fraction` of `data.tokens`"}},
      {"data.token_format",
       {enum_key(&Config::data, &Data::token_format, parse_token_format, token_format_name),
        "auto, llmc, u16",
        "`llmc` (llm.c's header + uint16), `u16` (raw little-endian uint16), `auto` (llmc when the "
        "file starts with llm.c's magic)"}},
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
      {"training.init_from",
       {str_key(&Config::training, &Training::init_from), "a safetensors path",
        "start from these weights (shapes checked by name) instead of the seed's"}},
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
        "linear warm-up, then cosine decay to `min_lr` at `max_steps`"}},
      {"optimizer.min_lr",
       {num_key(&Config::schedule, &Schedule::min_lr), "0 – `optimizer.lr`",
        "floor of the cosine decay"}},
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
       {bool_key(&Config::sharding, &Sharding::reshard_after_forward), "true, false",
        "free each block's gathered parameters after its forward (ZeRO-3); false keeps them for "
        "its backward (ZeRO-2)"}},
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
      {"sharding.shard_degree",
       {int_key(&Config::sharding, &Sharding::shard_degree), "≥ 1, or -1 (the rest)",
        "ranks that shard one copy of the parameters (consecutive ranks, ideally one node)"}},
      {"sharding.replicate_degree",
       {int_key(&Config::sharding, &Sharding::replicate_degree), "≥ 1, or -1 (the rest)",
        "copies that all-reduce their gradient shards; shard × replicate = world size (1: FSDP, "
        "world: DDP, between: HSDP)"}},
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
        "allow shard groups that straddle nodes while `replicate_degree` > 1"}},
      {"sharding.activation_checkpointing",
       {enum_key(&Config::sharding, &Sharding::activation_checkpointing,
                 parse_activation_checkpointing, activation_checkpointing_name),
        "none, selective, full",
        "what a micro-batch keeps for its backward: everything; matmul outputs and the residual "
        "stream; or each block's input only"}},
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
        "JSON lines, one object per step"}},
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

const std::map<std::string, KeyEntry>& registry() {
  static const std::map<std::string, KeyEntry> keys = [] {
    std::map<std::string, KeyEntry> all;
    for (KeyTable (*table)() : {model_keys, data_keys, training_keys, optimizer_keys,
                                precision_keys, sharding_keys, outputs_keys})
      for (auto& [key, entry] : table()) all.emplace(key, std::move(entry));
    return all;
  }();
  return keys;
}

const KeySpec& find_key(const std::string& key, const std::string& where) {
  auto it = registry().find(key);
  if (it != registry().end()) return it->second.spec;
  const std::string suggestion = closest_key(key);
  fail_input("{}: unknown config key '{}'{}", where, key,
             suggestion.empty() ? std::string("; `shardtrain config --list` lists every key")
                                : fmt::format("; did you mean '{}'?", suggestion));
}

[[noreturn]] void wrong_type(const std::string& where, const std::string& key, Kind kind,
                             const std::string& got) {
  fail_input("{}: '{}' must be {}, got {}", where, key, kind_name(kind), got);
}

Value value_from_toml(const toml::node& node, const std::string& key, Kind kind,
                      const std::string& where) {
  switch (kind) {
    case Kind::integer:
      if (auto v = node.value_exact<int64_t>()) return *v;
      break;
    case Kind::number:
      if (auto v = node.value_exact<double>()) return *v;
      if (auto v = node.value_exact<int64_t>()) return double(*v);
      break;
    case Kind::string:
      if (auto v = node.value_exact<std::string>()) return *v;
      break;
    case Kind::boolean:
      if (auto v = node.value_exact<bool>()) return *v;
      break;
  }
  std::ostringstream type;
  type << node.type();
  const std::string name = type.str();  // toml++'s: array, table, integer, ...
  wrong_type(
      where, key, kind,
      (std::string("aeiou").find(name.empty() ? 'x' : name[0]) == std::string::npos ? "a "
                                                                                    : "an ") +
          name);
}

Value value_from_text(const std::string& text, const std::string& key, Kind kind) {
  const std::string where = "command line";
  switch (kind) {
    case Kind::integer: {
      int64_t v = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || end != text.data() + text.size())
        wrong_type(where, key, kind, "'" + text + "'");
      return v;
    }
    case Kind::number: {
      try {
        size_t used = 0;
        const double v = std::stod(text, &used);
        if (used == text.size()) return v;
      } catch (const std::exception&) {
      }
      wrong_type(where, key, kind, "'" + text + "'");
    }
    case Kind::string:
      if (text.size() >= 2 && text.front() == '"' && text.back() == '"')
        return text.substr(1, text.size() - 2);
      return text;
    case Kind::boolean:
      if (text == "true" || text == "1") return true;
      if (text == "false" || text == "0") return false;
      wrong_type(where, key, kind, "'" + text + "'");
  }
  return text;
}

// A model.* key written by a file or an override: a key of another family is refused later.
void note_model_key(Config& config, const std::string& key) {
  auto& given = config.model.model_keys_given;
  if (key.starts_with("model.") && std::find(given.begin(), given.end(), key) == given.end())
    given.push_back(key);
}

void apply_toml(Config& config, const toml::table& root, const std::string& where) {
  for (const auto& [section_name, section_node] : root) {
    const std::string section(section_name.str());
    const toml::table* table = section_node.as_table();
    if (!table) {
      const std::string suggestion = closest_key(section);
      fail_input(
          "{}: '{}' is not a config section [model], [data], [training], [optimizer], "
          "[precision], [sharding], [checkpoint] or [metrics]{}",
          where, section,
          suggestion.empty() ? "" : fmt::format("; did you mean '{}'?", suggestion));
    }
    for (const auto& [key_name, node] : *table) {
      const std::string key = section + "." + std::string(key_name.str());
      const KeySpec& spec = find_key(key, where);
      spec.set(config, value_from_toml(node, key, spec.kind, where), key);
      note_model_key(config, key);
    }
  }
}

}  // namespace

std::vector<std::string> config_keys() {
  std::vector<std::string> keys;
  for (const auto& [k, _] : registry()) keys.push_back(k);
  return keys;
}

namespace {

// Sections in the order a config file uses them.
constexpr std::array<std::string_view, 8> kSectionOrder = {
    "model", "data", "training", "optimizer", "precision", "sharding", "checkpoint", "metrics"};

const char* kind_word(Kind k) {
  switch (k) {
    case Kind::integer:
      return "integer";
    case Kind::number:
      return "number";
    case Kind::string:
      return "string";
    case Kind::boolean:
      return "boolean";
  }
  return "?";
}

std::string_view section_of(std::string_view key) {
  return key.substr(0, key.find('.'));
}

// Every key, a section's keys after the previous section's; a key whose section is missing
// from kSectionOrder is an error here rather than a key the reference leaves out.
std::vector<std::pair<std::string_view, const KeyEntry*>> keys_in_section_order() {
  std::vector<std::pair<std::string_view, const KeyEntry*>> keys;
  for (std::string_view section : kSectionOrder)
    for (const auto& [key, entry] : registry())
      if (section_of(key) == section) keys.emplace_back(key, &entry);
  if (keys.size() != registry().size())
    fail("config reference: a key's section is not in kSectionOrder (launch/config.cpp)");
  return keys;
}

std::string markdown_reference(const Config& defaults) {
  std::string page =
      "# Config reference\n\n"
      "After reading this page you can set any key of a run: in a TOML file (`[section]` then "
      "`key = value`, passed with `--config FILE`) or on the command line as "
      "`section.key=value`, which wins over the file. The default is the default job's value "
      "(the bundled `tiny` config). A value outside its range, a key that does not exist or a "
      "value of the wrong type is exit 2 with one message naming the key; keys that contradict "
      "each other (`seq_len` beyond `block_size`, a `global_batch` that ranks x "
      "`micro_batches` cannot divide, `reduce_dtype` less precise than `param_dtype`) are "
      "refused naming both. `shardtrain config --config FILE [overrides]` prints the values a "
      "run would use.\n\n"
      "This page is generated by `shardtrain config --list --markdown > docs/config.md`; the "
      "test `cli.config_reference_is_current` fails when it differs from the code.\n";
  std::string_view section;
  for (const auto& [key, entry] : keys_in_section_order()) {
    if (section_of(key) != section) {
      section = section_of(key);
      page += fmt::format(
          "\n## [{}]\n\n| key | type | default | allowed | meaning |\n|---|---|---|---|---|\n",
          section);
    }
    page += fmt::format("| `{}` | {} | `{}` | {} | {} |\n", key, kind_word(entry->spec.kind),
                        entry->spec.show(defaults), entry->allowed, entry->meaning);
  }
  return page;
}

std::string text_reference(const Config& defaults) {
  std::string text;
  for (const auto& [key, entry] : keys_in_section_order())
    text += fmt::format("{:<36} {:<8} default {:<10} allowed: {}\n{:<36} {}\n", key,
                        kind_word(entry->spec.kind), entry->spec.show(defaults), entry->allowed, "",
                        entry->meaning);
  return text;
}

}  // namespace

std::string config_reference(bool markdown) {
  const Config defaults = load_config("", {});
  return markdown ? markdown_reference(defaults) : text_reference(defaults);
}

std::string closest_key(const std::string& key) {
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const auto& [candidate, _] : registry()) {
    // Compare against the whole name and, for a bare key, against the part after the dot.
    size_t d = edit_distance(key, candidate);
    const std::string tail = candidate.substr(candidate.find('.') + 1);
    if (key.find('.') == std::string::npos)
      d = std::min(d, edit_distance(key, tail));
    else
      d = std::min(d, edit_distance(key.substr(key.find('.') + 1), tail) + 1);
    if (d < best_distance) best_distance = d, best = candidate;
  }
  return best_distance <= std::max<size_t>(3, key.size() / 3) ? best : std::string();
}

std::vector<std::string> bundled_config_names() {
  std::vector<std::string> names;
  for (const auto& [name, _] : bundled_configs()) names.push_back(name);
  return names;
}

Config load_config(const std::string& source_in, const std::vector<std::string>& overrides) {
  const std::string source = source_in.empty() ? "tiny" : source_in;
  const auto& bundled = bundled_configs();
  if (auto it = bundled.find(source); it != bundled.end() && !std::filesystem::exists(source))
    return parse_config(it->second, "bundled config '" + source + "'", overrides);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(source, ec))
    fail_input("--config: '{}' is neither a readable file nor a bundled config ({})", source,
               fmt::join(bundled_config_names(), ", "));
  return parse_config(read_text_file(source), source, overrides);
}

Config parse_config(std::string_view text, const std::string& where,
                    const std::vector<std::string>& overrides) {
  Config config;
  try {
    apply_toml(config, toml::parse(text, where), where);
  } catch (const toml::parse_error& e) {
    fail_input("{}:{}:{}: invalid TOML: {}", where, e.source().begin.line, e.source().begin.column,
               e.description());
  }
  for (const std::string& item : overrides) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      fail_input("command line: '{}' is not a section.key=value override", item);
    const std::string key = item.substr(0, eq);
    const KeySpec& spec = find_key(key, "command line");
    spec.set(config, value_from_text(item.substr(eq + 1), key, spec.kind), key);
    note_model_key(config, key);
  }
  validate_config(config, 0);  // the world size is not known yet
  return config;
}

namespace {

void at_least_one(int64_t v, const char* key) {
  if (v < 1) fail_input("{} = {} must be at least 1", key, v);
}

void in_range(int64_t v, int64_t lo, int64_t hi, const char* key, const char* why) {
  if (v < lo || v > hi) fail_input("{} = {} must be in [{}, {}] ({})", key, v, lo, hi, why);
}

}  // namespace

void validate_model_config(const ModelConfig& model) {
  const ModelFamily& family = model_family(model.family);
  // Bounds far beyond any model that trains here, so every size computed from them fits
  // 64 bits; the memory check at start-up then says whether the model fits the machine.
  in_range(model.n_layer, 1, 1 << 16, "model.n_layer", "blocks");
  in_range(model.n_embd, 1, 1 << 17, "model.n_embd", "the width");
  in_range(model.n_head, 1, 1 << 17, "model.n_head", "attention heads");
  in_range(model.block_size, 1, 1 << 20, "model.block_size", "the context length");
  in_range(model.vocab_size, 1, 1 << 24, "model.vocab_size", "tokens");
  if (model.padded_vocab_size != 0 &&
      (model.padded_vocab_size < model.vocab_size || model.padded_vocab_size > (1 << 24)))
    fail_input(
        "model.padded_vocab_size = {} must be 0 (round model.vocab_size = {} up to a multiple of "
        "{}) or in [{}, {}]",
        model.padded_vocab_size, model.vocab_size, kVocabAlignment, model.vocab_size, 1 << 24);
  if (model.n_embd % model.n_head != 0)
    fail_input("model.n_embd = {} is not divisible by model.n_head = {}", model.n_embd,
               model.n_head);
  for (const std::string& key : model.model_keys_given)
    if (const ModelFamily* owner = model_family_owning(key); owner && owner != &family)
      fail_input("{} is a key of model.family = {}, but this run has model.family = {}", key,
                 owner->name, family.name);
  family.validate(model);
}

namespace {

void validate_training(const Config& c, int world_size) {
  if (!(c.data.val_fraction >= 0 && c.data.val_fraction < 1))
    fail_input("data.val_fraction = {} must be in [0, 1)", c.data.val_fraction);
  if (c.training.max_steps < 0)
    fail_input("training.max_steps = {} must not be negative", c.training.max_steps);
  in_range(c.training.global_batch, 1, 1 << 24, "training.global_batch", "sequences per step");
  in_range(c.training.micro_batches, 1, 1 << 24, "training.micro_batches", "per step");
  at_least_one(c.training.seq_len, "training.seq_len");
  if (c.training.seq_len > c.model.block_size)
    fail_input("training.seq_len = {} is longer than the model's context model.block_size = {}",
               c.training.seq_len, c.model.block_size);
  const int ranks = std::max(world_size, 1);  // unknown yet: at least one
  const int64_t divisor = int64_t(ranks) * c.training.micro_batches;
  if (c.training.global_batch % divisor != 0)
    fail_input(
        "training.global_batch = {} cannot be split evenly over {} rank(s) x "
        "training.micro_batches = {}; make it a multiple of {}",
        c.training.global_batch, ranks, c.training.micro_batches, divisor);
  if (c.training.grad_clip < 0)
    fail_input("training.grad_clip = {} must be >= 0 (0 disables clipping)", c.training.grad_clip);
  in_range(c.training.threads, 0, 1024, "training.threads",
           "OpenMP threads per rank; 0: cores / ranks on the node");
  if (c.training.seed < 0) fail_input("training.seed = {} must not be negative", c.training.seed);
  if (!(c.training.stall_timeout >= 0 && c.training.stall_timeout <= 86400))
    fail_input(
        "training.stall_timeout = {} must be in [0, 86400] seconds (how long a rank may be "
        "silent or stuck before the job ends; 0 turns the check off)",
        c.training.stall_timeout);
}

void validate_optimizer(const Config& c) {
  if (!(c.schedule.lr > 0)) fail_input("optimizer.lr = {} must be > 0", c.schedule.lr);
  if (!(c.schedule.min_lr >= 0 && c.schedule.min_lr <= c.schedule.lr))
    fail_input("optimizer.min_lr = {} must be in [0, optimizer.lr = {}]", c.schedule.min_lr,
               c.schedule.lr);
  if (!(c.optimizer.beta1 >= 0 && c.optimizer.beta1 < 1))
    fail_input("optimizer.beta1 = {} must be in [0, 1)", c.optimizer.beta1);
  if (!(c.optimizer.beta2 >= 0 && c.optimizer.beta2 < 1))
    fail_input("optimizer.beta2 = {} must be in [0, 1)", c.optimizer.beta2);
  if (!(c.optimizer.eps > 0)) fail_input("optimizer.eps = {} must be > 0", c.optimizer.eps);
  if (!(c.optimizer.weight_decay >= 0))
    fail_input("optimizer.weight_decay = {} must be >= 0", c.optimizer.weight_decay);
  if (c.schedule.warmup_steps < 0)
    fail_input("optimizer.warmup_steps = {} must not be negative", c.schedule.warmup_steps);
}

void validate_precision(const Config& c) {
  check_bf16_matmul_path(c.precision.bf16_matmul);
  if (c.precision.param_dtype == DType::f32 && c.precision.reduce_dtype == DType::bf16)
    fail_input(
        "precision.reduce_dtype = bf16 is less precise than precision.param_dtype = fp32; "
        "gradients would be reduced in less precision than the parameters they update. Use "
        "reduce_dtype = fp32");
  if (c.precision.reduce_dtype != DType::f32)
    fail_input(
        "precision.reduce_dtype = {}: only fp32 is supported (gradients are reduced and "
        "kept in FP32)",
        dtype_name(c.precision.reduce_dtype));
  if (c.precision.output_dtype != DType::f32)
    fail_input(
        "precision.output_dtype = {}: only fp32 is supported (logits feed the FP32 "
        "cross-entropy)",
        dtype_name(c.precision.output_dtype));
}

void validate_outputs(const Config& c, int world_size) {
  if (c.sharding.prefetch < 0 || c.sharding.prefetch > 8)
    fail_input("sharding.prefetch = {} must be in [0, 8]", c.sharding.prefetch);
  if (world_size > 0) mesh_shape(c, world_size);
  if (c.sharding.ranks_per_node < 0)
    fail_input("sharding.ranks_per_node = {} must be >= 0 (0: detect)", c.sharding.ranks_per_node);
  if (world_size > 0 && c.sharding.ranks_per_node > 0 &&
      world_size % c.sharding.ranks_per_node != 0)
    fail_input("sharding.ranks_per_node = {} does not divide the {} ranks into whole nodes",
               c.sharding.ranks_per_node, world_size);
  if (c.checkpoint.every < 0)
    fail_input("checkpoint.every = {} must not be negative", c.checkpoint.every);
  if (c.checkpoint.keep < 1)
    fail_input("checkpoint.keep = {} must be at least 1", c.checkpoint.keep);
  if (!(c.checkpoint.async_timeout >= 1 && c.checkpoint.async_timeout <= 86400))
    fail_input("checkpoint.async_timeout = {} must be in [1, 86400] seconds",
               c.checkpoint.async_timeout);
}

}  // namespace

StepRange::StepRange(std::string_view view) {
  const std::string text(view);
  if (text.empty()) return;
  const size_t dots = text.find("..");
  try {
    if (dots == std::string::npos) throw std::invalid_argument("no '..'");
    size_t used = 0;
    first = std::stoll(text.substr(0, dots), &used);
    if (used != dots) throw std::invalid_argument("trailing characters");
    const std::string rest = text.substr(dots + 2);
    last = std::stoll(rest, &used);
    if (used != rest.size()) throw std::invalid_argument("trailing characters");
  } catch (const std::exception&) {
    fail_input("metrics.trace_steps = '{}': expected FIRST..LAST step numbers, e.g. '10..12'",
               text);
  }
  if (first < 1 || last < first)
    fail_input("metrics.trace_steps = '{}': need 1 <= FIRST <= LAST", text);
}

std::string StepRange::name() const {
  return first == 1 && last == INT64_MAX ? std::string() : fmt::format("{}..{}", first, last);
}

std::string ResumeFrom::name() const {
  if (newest()) return "auto";
  if (never()) return "never";
  return *path();
}

void validate_config(const Config& c, int world_size) {
  validate_model_config(c.model);
  validate_training(c, world_size);
  validate_optimizer(c);
  validate_precision(c);
  validate_outputs(c, world_size);
}

MeshShape mesh_shape(const Config& c, int world_size) {
  int64_t shard = c.sharding.shard_degree, replicate = c.sharding.replicate_degree;
  auto check = [](int64_t v, const char* key) {
    if (v != -1 && v < 1) fail_input("sharding.{} = {} must be >= 1, or -1 for the rest", key, v);
  };
  check(shard, "shard_degree");
  check(replicate, "replicate_degree");
  if (shard == -1 && replicate == -1)
    fail_input(
        "sharding.shard_degree and sharding.replicate_degree are both -1 (the rest); give one "
        "of them");
  const char* rest_key = shard == -1 ? "sharding.shard_degree" : "sharding.replicate_degree";
  const int64_t given = shard == -1 ? replicate : shard;
  if ((shard == -1 || replicate == -1) && world_size % given != 0)
    fail_input("{} = -1 (the rest): {} ranks are not a multiple of {} = {}", rest_key, world_size,
               shard == -1 ? "sharding.replicate_degree" : "sharding.shard_degree", given);
  if (shard == -1) shard = world_size / replicate;
  if (replicate == -1) replicate = world_size / shard;
  if (shard * replicate != world_size)
    fail_input(
        "sharding.shard_degree = {} x sharding.replicate_degree = {} = {} is not the world size "
        "{}; their product must be the number of ranks (-1 for one of them means the rest, as "
        "in sharding.replicate_degree = -1)",
        shard, replicate, shard * replicate, world_size);
  return {int(shard), int(replicate)};
}

std::vector<std::string> describe_config(const Config& config) {
  std::vector<std::string> lines;
  const ModelFamily& family = model_family(config.model.family);
  for (const auto& [key, entry] : registry()) {
    const ModelFamily* owner = model_family_owning(key);
    if (!owner || owner == &family) lines.push_back(key + " = " + entry.spec.show(config));
  }
  return lines;
}

}  // namespace st
