// export, eval and sample: commands that load a trained model (from a sharded checkpoint or a
// safetensors file) into the sharded runtime at the current world size and use it.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "api/evaluate.hpp"
#include "api/rank_context.hpp"
#include "checkpoint/checkpoint.hpp"
#include "checkpoint/hf_weights.hpp"
#include "collectives/agreement.hpp"
#include "core/data/dataset.hpp"
#include "core/data/gpt2_tokenizer.hpp"
#include "core/data/tokenizer.hpp"
#include "core/file_io.hpp"
#include "core/json_parse.hpp"
#include "core/memory_stats.hpp"
#include "core/rng.hpp"
#include "core/staged_folder.hpp"
#include "core/staged_output.hpp"
#include "core/tokenizer/hf_tokenizer.hpp"
#include "launch/commands.hpp"
#include "launch/config.hpp"
#include "launch/model_factory.hpp"
#include "launch/names.hpp"
#include "launch/sample_text.hpp"
#include "launch/session.hpp"
#include "parallel/fsdp/memory_budget.hpp"
#include "parallel/fsdp/unit_layout.hpp"

namespace st {
namespace {

namespace fs = std::filesystem;
// More than any context holds many times over; a typo like 10000000 is caught, not run.
constexpr int64_t kMaxSampleTokens = 1000000;

// A model loaded from a checkpoint or weights file, sharded over this job's ranks.
struct LoadedModel {
  RankContext ranks;
  ModelConfig config;
  DType file_dtype = DType::f32;
  std::unique_ptr<Model> model;
  std::unique_ptr<DeviceMesh> mesh;  // FSDP over every rank
  std::unique_ptr<FsdpRuntime> fsdp;
  // The tokenizer.json that goes with the model: a --weights folder's own, or the one the
  // checkpoint's run tokenized its data with; empty when none.
  std::string tokenizer;
  // The data the checkpoint's run trained on, when it recorded it.
  std::optional<DataSource> trained_on;
  // What was read: the checkpoint, or the plan of the weights files (files empty otherwise).
  CheckpointInfo info;
  WeightsPlan plan;
  // How messages name it ("--weights 'hf'"), and where its context (block_size) comes from.
  std::string source, context_from;
};

// meta.data.tokenizer of a checkpoint, when its run tokenized text with one.
std::string recorded_tokenizer(const nlohmann::json& meta) {
  const nlohmann::json data = meta.value("data", nlohmann::json::object());
  if (!data.is_object() || !data.contains("tokenizer") || !data["tokenizer"].is_string()) return "";
  return data["tokenizer"].get<std::string>();
}

// The data a checkpoint's run trained on (meta.data: path, tokens, val_tokens, token_format,
// val_fraction), or nullopt for a checkpoint saved before runs recorded it. Every value is
// checked: a wrong type or range is an InputError naming the key.
std::optional<DataSource> recorded_data(const nlohmann::json& meta, const std::string& checkpoint) {
  const nlohmann::json data = meta.value("data", nlohmann::json::object());
  if (!data.is_object() || !data.contains("path")) return std::nullopt;
  const std::string where = fmt::format("checkpoint '{}': meta.data", checkpoint);
  auto text = [&](const char* key) {
    if (!data.contains(key) || !data[key].is_string())
      fail_input("{}.{} must be a string", where, key);
    return data[key].get<std::string>();
  };
  DataSource source;
  source.path = text("path");
  source.tokens = text("tokens");
  source.val_tokens = text("val_tokens");
  source.token_format = parse_token_format(text("token_format"), where + ".token_format");
  source.val_fraction = json_number_at(data, "val_fraction", where);
  if (!(source.val_fraction >= 0 && source.val_fraction < 1))
    fail_input("{}.val_fraction = {} must be in [0, 1)", where, source.val_fraction);
  source.tokenizer = recorded_tokenizer(meta);
  return source;
}

// read_model for --weights: a safetensors file with a config.json beside it, or a model folder.
void read_weights_model(LoadedModel& m, const std::string& weights) {
  if (!fs::is_regular_file(weights) && !fs::is_directory(weights))
    fail_input(
        "--weights: '{}' is not a file or a model folder (a safetensors file, or a "
        "folder with config.json)",
        weights);
  const std::string config_json = weights_config_json(weights);
  if (!fs::exists(config_json))
    fail_input("'{}' is needed {} '{}' (the model's shape)", config_json,
               fs::is_directory(weights) ? "in" : "beside", weights);
  m.config = model_config_beside(weights);
  // Every header checked against the model config.json describes before anything is
  // allocated (the model is only its parameters' specs until the runtime shards it).
  const auto specs_only = model_family(m.config.family).build(m.config, DType::f32);
  try {
    m.plan = plan_weights(weights, specs_only->param_specs());
  } catch (const InputError& e) {
    // The shape came from config.json: either file may be the wrong one.
    fail_input("--weights '{}' does not fit the model '{}' {} it describes ({}): {}", weights,
               config_json, fs::is_directory(weights) ? "in" : "beside", specs_only->describe(),
               e.what());
  }
  m.file_dtype = plan_compute_dtype(m.plan);
  m.tokenizer = weights_tokenizer_json(weights);
  m.source = fmt::format("--weights '{}'", weights);
  m.context_from = fmt::format(
      "{} in '{}'", m.config.family == "gpt2" ? "n_positions" : "max_position_embeddings",
      config_json);
}

// Reads what `checkpoint` or `weights` holds (the model's shape, the file's dtype, its
// tokenizer; a weights file's headers checked against the model) on every rank, allocating
// nothing. `config` gives the thread count (training.threads; commands without a config pass the
// defaults).
void read_model(LoadedModel& m, const std::string& checkpoint, const std::string& weights,
                const Config& config) {
  if (checkpoint.empty() == weights.empty())
    fail_input("give exactly one of --checkpoint DIR and --weights FILE");
  use_threads(config, m.ranks.ranks_on_node);
  apply_matmul_settings(config);
  // Read by every rank; a rank on another node may see another file, or none.
  run_agreed(*m.ranks.group, [&] {
    if (!checkpoint.empty()) {
      m.info = read_checkpoint_info(checkpoint);
      m.config = model_config_from_json(m.info.meta.value("model", nlohmann::json()),
                                        fmt::format("checkpoint '{}': meta.model", checkpoint));
      const nlohmann::json precision = m.info.meta.value("precision", nlohmann::json::object());
      const nlohmann::json dtype = !precision.is_object()              ? nlohmann::json()
                                   : precision.contains("param_dtype") ? precision["param_dtype"]
                                                                       : nlohmann::json("bf16");
      if (!dtype.is_string())
        fail_input("checkpoint '{}': meta.precision.param_dtype = {} must be fp32 or bf16",
                   checkpoint, dtype.dump());
      m.file_dtype =
          parse_float_dtype(dtype.get<std::string>(), "checkpoint precision.param_dtype");
      m.tokenizer = recorded_tokenizer(m.info.meta);
      m.trained_on = recorded_data(m.info.meta, checkpoint);
      m.source = fmt::format("--checkpoint '{}'", checkpoint);
      m.context_from = "meta.model.block_size in its manifest.json";
    } else {
      read_weights_model(m, weights);
    }
  });
}

// An InputError when this rank's share of `m`'s model, computing in `dtype` over forwards of
// `rows` x `T` tokens (0 rows: none), does not fit the machine's memory: before anything is
// allocated (a 33 GiB model grew to 14 GB before it failed). `reduce` says what else the command
// can make smaller.
void check_model_fits(const LoadedModel& m, DType dtype, int64_t rows, int64_t T,
                      const std::string& reduce) {
  const ProcessGroup& group = *m.ranks.group;
  int64_t activations = 0;
  try {
    activations = rows > 0 ? m.model->activation_bytes(rows, T) : 0;
  } catch (const Error& e) {
    fail_input("the activations of {} rows x {} tokens per rank cannot be sized: {}", rows, T,
               e.what());
  }
  const auto units = layout_units(m.model->param_specs(), m.model->num_units(), group.size());
  const MemoryBudget b = forward_memory_budget(units, dtype, FsdpOptions{}.prefetch, activations);
  const std::string beyond = memory_shortfall_on_node(b.total(), group);
  if (beyond.empty()) return;
  const double gib = 1024.0 * kMiB;
  fail_input(
      "the memory budget is {:.2f} GiB per rank (shards {:.2f} + unsharded {:.2f} + activations "
      "{:.2f}) {}. The model of {} ({}) keeps FP32 master and gradient shards of 8 bytes per "
      "parameter over the ranks: run on more ranks (shardrun -n N){}",
      double(b.total()) / gib, double(b.master_and_grad) / gib, double(b.unsharded_params) / gib,
      double(b.activations) / gib, beyond, m.source, m.model->describe(), reduce);
}

// Shards `m`'s model over the ranks, computing in `param_dtype` (nullopt: the file's own), and
// loads it, once its memory budget (forwards of `rows` x `T` tokens) fits.
void materialize_model(LoadedModel& m, std::optional<DType> param_dtype, int64_t rows, int64_t T,
                       const std::string& reduce = "") {
  const DType dtype = param_dtype.value_or(m.file_dtype);
  m.model = model_family(m.config.family).build(m.config, dtype);  // specs only
  // The machine's memory (ulimit -v) may differ between ranks: they agree on the outcome.
  run_agreed(*m.ranks.group, [&] { check_model_fits(m, dtype, rows, T, reduce); });
  FsdpOptions o;
  o.param_dtype = dtype;
  m.mesh =
      std::make_unique<DeviceMesh>(*m.ranks.group, MeshShape{.dp_shard = m.ranks.group->size()});
  m.fsdp = std::make_unique<FsdpRuntime>(*m.model, *m.mesh, o, 0);
  if (m.plan.files.empty()) {
    check_checkpoint_layout(m.info, *m.fsdp);
    ShardedState master{"master", {}};
    for (const ShardSpan& s : m.fsdp->spans()) master.spans.push_back(s.master);
    load_checkpoint(m.info, *m.fsdp, {master});
  } else {
    load_weights(m.plan, *m.fsdp);
  }
}

// Windows [w·(T+1), (w+1)·(T+1)) for w in [first, first + rows): T inputs, T targets each.
Batch packed_window_batch(const TokenStream& tokens, int64_t first, int64_t rows, int64_t T) {
  Batch b{Tensor::empty("tokens.inputs", {rows, T}, DType::i32),
          Tensor::empty("tokens.targets", {rows, T}, DType::i32)};
  std::vector<int32_t> w(size_t(T + 1));  // int32 [T + 1]
  for (int64_t r = 0; r < rows; ++r) {
    tokens.read((first + r) * (T + 1), T + 1, w.data());
    std::copy_n(w.data(), T, b.inputs.data<int32_t>() + r * T);
    std::copy_n(w.data() + 1, T, b.targets.data<int32_t>() + r * T);
  }
  return b;
}

}  // namespace

namespace {

// One file: a .safetensors name, or anything that exists and is not a folder (a device is then
// refused by name); a folder otherwise.
bool names_one_file(const std::string& out) {
  if (out.size() > 12 && out.compare(out.size() - 12, 12, ".safetensors") == 0) return true;
  std::error_code ec;
  const fs::file_status status = fs::status(out, ec);
  return fs::exists(status) && !fs::is_directory(status);
}

// Collective: rank 0's make_staging_tag() on every rank, naming this job's temporaries (two
// exports of one output never share one).
std::string job_staging_tag(ProcessGroup& group) {
  constexpr int64_t kMaxTag = 128;
  Tensor bytes = Tensor::zeros("staging_tag", {kMaxTag}, DType::u8);
  if (group.rank() == 0) {
    const std::string tag = make_staging_tag().substr(0, kMaxTag - 1);
    std::copy(tag.begin(), tag.end(), bytes.data<uint8_t>());
  }
  group.broadcast(bytes, 0)->wait();
  return std::string(reinterpret_cast<const char*>(bytes.data<uint8_t>()));
}

// Hugging Face's config.json of the family's model class, as text.
std::string hf_config_text(const ModelConfig& config, DType dtype) {
  return model_family(config.family).hf_config(config, dtype).dump(2) + "\n";
}

// --overwrite replaces an earlier one-file export only: a safetensors file at `out`, and the
// model's config.json beside it together with it. A config.json beside weights that are not
// there goes with other weights (or none): never replaced. InputErrors naming the file.
void check_earlier_export(const std::string& out, const std::string& config_json) {
  const bool weights_exist = fs::exists(out);
  if (weights_exist) {
    try {
      read_safetensors_header(out);
    } catch (const InputError& e) {
      fail_input(
          "export --out: {}: not replaced, even with --overwrite (name a new file, or an "
          "earlier export)",
          e.what());
    }
  }
  if (!fs::exists(config_json)) return;
  if (!weights_exist)
    fail_input(
        "export's config.json: '{}' exists, and no weights are at '{}': it goes with other "
        "weights, not replaced, even with --overwrite (export into another folder)",
        config_json, out);
  bool model_config = false;
  std::error_code ec;
  const auto bytes = fs::file_size(config_json, ec);
  if (!ec && bytes < (uint64_t(4) << 20)) try {
      const auto j = parse_json_object(read_regular_text_file(config_json), config_json);
      model_config = j.contains("model_type") && j["model_type"].is_string();
    } catch (const InputError&) {
    }
  if (!model_config)
    fail_input(
        "export's config.json: '{}' is not a model's config.json (no model_type): not replaced, "
        "even with --overwrite (export into another folder)",
        config_json);
}

// export --out FILE.safetensors: the weights and the config.json beside them appear together,
// or neither does. `tag` names this job's temporaries.
void export_one_file(LoadedModel& m, const ExportOptions& o, DType dtype, const std::string& tag) {
  std::optional<StagedOutput> weights, config_json;
  agree_on_startup(*m.ranks.group, [&] {
    if (o.checkpoint.empty()) fail_input("export: --checkpoint DIR is required");
    // An existing file is replaced only when asked (--overwrite), the config.json beside it too.
    const auto existing =
        o.overwrite ? StagedOutput::Existing::replace : StagedOutput::Existing::refuse;
    weights.emplace(o.out, "export --out", StagedOutput::Targets::regular_only, existing,
                    "add --overwrite", tag);
    if (m.ranks.rank() == 0) {
      weights->check_writable();
      const std::string beside = weights_config_json(fs::absolute(o.out).string());
      config_json.emplace(beside, "export's config.json", StagedOutput::Targets::any, existing,
                          "add --overwrite", tag);
      config_json->check_writable();
      if (o.overwrite) check_earlier_export(o.out, beside);
    }
  });
  // Agreed apart: reading the model agrees within (run_agreed), and a rank that had failed
  // above would meet the others' inner agreement with its outer one.
  agree_on_startup(*m.ranks.group, [&] {
    read_model(m, o.checkpoint, "", Config{});
    materialize_model(m, DType::f32, 0, 0);
  });
  save_safetensors(weights->write_path(), *m.fsdp, dtype,
                   {{"format", "pt"}, {"producer", "shardtrain"}});
  if (m.ranks.rank() == 0) {
    const std::string text = hf_config_text(m.config, dtype);
    config_json->file().write(text.data(), text.size());
    config_json->file().sync_and_close();
    commit_together({&*weights, &*config_json});
    fmt::print("exported {} ({}) and {}\n", o.out, dtype_name(dtype), config_json->path());
  }
  // The other ranks drop their view of the temporary (removing it) only once rank 0 committed.
  m.ranks.group->barrier()->wait();
}

// export --out DIR: a folder transformers.from_pretrained reads (config.json, model.safetensors
// or shards of at most --max-shard-size with their index), appearing whole or not at all.
void export_folder(LoadedModel& m, const ExportOptions& o, DType dtype, const std::string& tag) {
  const int64_t max_shard = parse_byte_size(
      o.max_shard_size.empty() ? std::string("5GB") : o.max_shard_size, "--max-shard-size");
  StagedFolder folder(o.out, "export --out", m.ranks.rank() == 0, o.overwrite, "add --overwrite",
                      tag);
  std::vector<std::string> tokenizer_files;
  agree_on_startup(*m.ranks.group, [&] {
    if (o.checkpoint.empty()) fail_input("export: --checkpoint DIR is required");
    if (m.ranks.rank() == 0) folder.create();
  });
  // Agreed apart, as in export_one_file: rank 0's refusal must not meet read_model's agreement.
  agree_on_startup(*m.ranks.group, [&] {
    read_model(m, o.checkpoint, "", Config{});
    materialize_model(m, DType::f32, 0, 0);
    // The run's tokenizer goes into the folder (read first: a damaged one is refused here).
    if (!m.tokenizer.empty() && m.ranks.rank() == 0) {
      if (!fs::exists(m.tokenizer))
        fmt::print("export: the run's tokenizer '{}' is gone; the folder gets none\n", m.tokenizer);
      else
        tokenizer_files = HfTokenizer::load(m.tokenizer).files();
    }
  });
  const auto& specs = m.model->param_specs();
  const auto shards = split_into_shards(specs, dtype, max_shard);
  // Each file written by every rank at once, each rank its own slices.
  for (size_t k = 0; k < shards.size(); ++k)
    save_safetensors(folder.file(shard_file_name(k, shards.size())), *m.fsdp, dtype,
                     {{"format", "pt"}, {"producer", "shardtrain"}}, shards[k]);
  if (m.ranks.rank() == 0) {
    write_text_file(folder.file("config.json"), hf_config_text(m.config, dtype));
    if (shards.size() > 1)
      write_text_file(folder.file(kIndexName), shard_index_json(specs, dtype, shards));
    std::string copied;
    for (const std::string& file : tokenizer_files) {
      const std::string name = fs::path(file).filename().string();
      fs::copy_file(file, folder.file(name));
      copied += ", " + name;
    }
    folder.commit();
    fmt::print(
        "exported {}: {} ({}){}, config.json{}\n", o.out,
        shards.size() == 1 ? std::string(kSingleFileName) : fmt::format("{} shards", shards.size()),
        dtype_name(dtype), shards.size() > 1 ? fmt::format(", {}", kIndexName) : "", copied);
  }
}

}  // namespace

int run_export(const ExportOptions& o) {
  LoadedModel m;
  m.ranks = start_ranks();
  return run_after_startup([&] {
    if (o.out.empty()) fail_input("export: --out FILE.safetensors or --out DIR is required");
    const DType dtype = parse_float_dtype(o.dtype, "--dtype");
    const std::string tag = job_staging_tag(*m.ranks.group);
    if (names_one_file(o.out)) {
      if (!o.max_shard_size.empty())
        fail_input("export: --max-shard-size splits a folder export; --out '{}' is one file",
                   o.out);
      export_one_file(m, o, dtype, tag);
    } else {
      export_folder(m, o, dtype, tag);
    }
    m.ranks.group->barrier()->wait();  // every rank leaves once the output is whole
    return 0;
  });
}

namespace {

// What eval scores: consecutive windows of a token file (--tokens), or a dataset's validation
// split, and its name for the report.
struct EvalData {
  TokenStream tokens;
  std::optional<Dataset> data;
  int64_t T = 0, windows = 0;
  std::string what;
  bool bytes = false;  // the tokens are a text's bytes: loss / ln 2 is bits per byte
};

void open_eval_tokens(const EvalOptions& o, const Config& config, const LoadedModel& m,
                      EvalData& e) {
  const std::string& path = o.tokens;
  // data.token_format says how the file is read (auto: llm.c's format or raw uint16, told apart
  // by the magic); the other data.* keys would name data that --tokens replaces.
  for (const std::string& kv : o.common.overrides) {
    const std::string key = kv.substr(0, kv.find('='));
    if (key.rfind("data.", 0) == 0 && key != "data.token_format")
      fail_input(
          "eval: {} does not apply with --tokens '{}' (of data.*, only data.token_format "
          "does: how that file is read)",
          key, path);
  }
  try {
    e.tokens = TokenStream::from_files({path}, config.data.token_format, m.config.vocab_size);
  } catch (const InputError& error) {
    fail_input("--tokens: {}", error.what());
  }
  e.windows = e.tokens.size() / (e.T + 1);
  if (e.windows == 0)
    fail_input("--tokens '{}' holds {} tokens, fewer than one window of {}", path, e.tokens.size(),
               e.T + 1);
  e.what = fmt::format("'{}'", path);
}

// --data FILE, else data.* overrides, else the data a checkpoint's run trained on, else the
// config's (data.path or the built-in corpus).
void open_eval_dataset(const EvalOptions& o, const LoadedModel& m, Config& config, EvalData& e) {
  bool data_named = !o.data.empty();
  for (const auto& kv : o.common.overrides) data_named = data_named || kv.rfind("data.", 0) == 0;
  const bool trained_on = !data_named && m.trained_on;
  if (trained_on) config.data = *m.trained_on;
  if (!o.data.empty()) config.data.path = o.data;
  // Text is tokenized as the model's own tokenizer does (a folder's, a run's).
  if (!o.data.empty() && config.data.tokenizer.empty()) config.data.tokenizer = m.tokenizer;
  config.model.vocab_size = m.config.vocab_size;  // ids are checked against the model's
  config.training.seq_len = e.T;
  e.data.emplace(load_data(config));
  e.windows = window_count(e.data->val(), e.T);
  if (e.windows == 0)
    fail_input("eval: the validation split of {} is shorter than one window", e.data->source());
  e.bytes = config.data.tokens.empty() && config.data.tokenizer.empty();  // a text's bytes
  e.what = !config.data.val_tokens.empty()
               ? e.data->val().source()
               : fmt::format("the validation split of {}", e.data->source());
  if (trained_on) e.what += ", the data the checkpoint trained on";
}

}  // namespace

namespace {

// eval's window. training.seq_len set (on the command line or by --config) is honoured, and
// refused when longer than the model's context; unset, the default is capped at the context.
int64_t eval_window(const Config& config, bool seq_len_set, const LoadedModel& m) {
  const int64_t asked = config.training.seq_len, context = m.config.block_size;
  if (!seq_len_set) return std::min(asked, context);
  if (asked < 1) fail_input("training.seq_len = {} must be at least 1", asked);
  if (asked > context)
    fail_input(
        "eval: training.seq_len = {} is longer than the context of {}: {} positions ({}); give "
        "training.seq_len <= {}",
        asked, m.source, context, m.context_from, context);
  return asked;
}

// eval's config: training.seq_len is checked against the loaded model's context (eval_window),
// not against the config's model.block_size (eval's model is the one loaded): the config is
// checked with a window any context holds, then given the config's or the command line's.
// Sets whether training.seq_len was set.
Config eval_config(const EvalOptions& o, bool& seq_len_set) {
  std::vector<std::string> others, seq_len;
  for (const std::string& kv : o.common.overrides)
    (kv.rfind("training.seq_len=", 0) == 0 ? seq_len : others).push_back(kv);
  const int64_t configured = load_config(o.common.config, {}).training.seq_len;
  others.push_back("training.seq_len=1");
  Config config = load_config(o.common.config, others);
  config.training.seq_len = configured;
  for (const std::string& kv : seq_len) apply_override(config, kv);
  seq_len_set = !seq_len.empty() || o.common.config != CommonOptions{}.config;
  return config;
}

}  // namespace

int run_eval(const EvalOptions& o) {
  LoadedModel m;
  m.ranks = start_ranks();
  return run_after_startup([&] {
    Config config;
    EvalData e;
    agree_on_startup(*m.ranks.group, [&] {
      bool seq_len_set = false;
      config = eval_config(o, seq_len_set);
      if (!o.data.empty() && !o.tokens.empty())
        fail_input("eval: give at most one of --data and --tokens");
      bool dtype_given = false;
      for (const auto& kv : o.common.overrides)
        dtype_given = dtype_given || kv.rfind("precision.param_dtype=", 0) == 0;
      read_model(m, o.checkpoint, o.weights, config);
      e.T = eval_window(config, seq_len_set, m);
      // sharded_loss_sum's rows per rank.
      const int64_t W = m.ranks.size(), rows = (config.training.global_batch + W - 1) / W;
      materialize_model(
          m, dtype_given ? std::optional<DType>(config.precision.param_dtype) : std::nullopt, rows,
          e.T, ", or evaluate fewer tokens at once (training.global_batch, training.seq_len)");
      if (!o.tokens.empty())
        open_eval_tokens(o, config, m, e);
      else
        open_eval_dataset(o, m, config, e);
    });
    const int64_t T = e.T;
    const double sum =
        sharded_loss_sum(*m.model, *m.fsdp, e.windows, config.training.global_batch,
                         [&](int64_t first, int64_t rows) {
                           return e.data ? window_batch(e.data->val(), first, rows, T)
                                         : packed_window_batch(e.tokens, first, rows, T);
                         });
    const int64_t n = e.windows * T;
    const double loss = sum / double(n);
    const char* per = e.bytes ? "byte" : "token";
    if (m.ranks.rank() == 0) {
      if (o.common.json)
        fmt::print("{}\n", nlohmann::json{{"loss", loss},
                                          {fmt::format("bits_per_{}", per), loss / std::log(2.0)},
                                          {"tokens", n},
                                          {"data", e.what}}
                               .dump());
      else
        fmt::print("eval: loss {:.4f} | {:.4f} bits per {} | {} tokens in {} windows of {} | {}\n",
                   loss, loss / std::log(2.0), per, n, e.windows, T, e.what);
    }
    return 0;
  });
}

namespace {

void check_sample_options(const SampleOptions& o) {
  if (o.tokens < 0 || o.tokens > kMaxSampleTokens)
    fail_input("sample: --tokens = {} must be in [0, {}]", o.tokens, kMaxSampleTokens);
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature))
    fail_input("sample: --temperature must be a finite number >= 0, got {}", o.temperature);
  if (o.seed < 0) fail_input("sample: --seed = {} must not be negative", o.seed);
  if (o.prompt.empty() == o.prompt_tokens.empty())
    fail_input("sample: give exactly one of --prompt TEXT and --prompt-tokens ID,ID,...");
}

// Token `i` drawn from the first V logits: the largest at temperature 0, else a draw that is a
// function of (seed, i) only, so every rank draws the same. `p` is scratch of V doubles.
int32_t draw_token(const float* logits, int64_t V, double temperature, int64_t seed, int64_t i,
                   std::vector<double>& p) {
  if (temperature == 0) return int32_t(std::max_element(logits, logits + V) - logits);
  const float top = *std::max_element(logits, logits + V);
  double total = 0;
  for (int64_t v = 0; v < V; ++v) total += p[size_t(v)] = std::exp((logits[v] - top) / temperature);
  const auto bits = random_block(uint64_t(seed), 7, uint64_t(i));
  double u = uniform_open0(bits[0]) * total;
  for (int64_t v = 0; v < V; ++v)
    if ((u -= p[size_t(v)]) <= 0) return int32_t(v);
  return int32_t(V - 1);
}

}  // namespace

int run_sample(const SampleOptions& o) {
  LoadedModel m;
  m.ranks = start_ranks();
  return run_after_startup([&] {
    std::unique_ptr<SampleText> shown;
    std::vector<int32_t> text;  // the prompt's ids, then every token drawn
    agree_on_startup(*m.ranks.group, [&] {
      check_sample_options(o);
      read_model(m, o.checkpoint, o.weights, Config{});
      materialize_model(m, std::nullopt, 1, m.config.block_size);  // one row, up to the context
      shown = std::make_unique<SampleText>(o.vocab, m.tokenizer, m.config.vocab_size);
      text = shown->prompt_ids(o.prompt, o.prompt_tokens);
    });
    const bool lead = m.ranks.rank() == 0;
    const int64_t V = m.config.vocab_size;
    // The text streams out as it is generated: the prompt, then each token when drawn.
    if (lead) fmt::print("{}", shown->next_text(text.data(), text.size()));
    std::vector<double> p(static_cast<size_t>(V));
    for (int64_t i = 0; i < o.tokens; ++i) {
      // Every rank runs the same forward (parameters are gathered together) and draws the same
      // token.
      const int64_t T = std::min<int64_t>(int64_t(text.size()), m.config.block_size);
      Batch b{Tensor::empty("sample.inputs", {1, T}, DType::i32),
              Tensor::zeros("sample.targets", {1, T}, DType::i32)};
      std::copy_n(text.end() - T, T, b.inputs.data<int32_t>());
      m.model->forward_loss(b, *m.fsdp);
      // Row T - 1 of the logits; only the first V (real) columns are drawn from.
      const float* logits = m.model->last_logits().row(T - 1);
      text.push_back(draw_token(logits, V, o.temperature, o.seed, i, p));
      if (lead) {
        fmt::print("{}", shown->next_text(text.data(), text.size()));
        flush_standard_output();
      }
    }
    m.fsdp->reshard_all();
    if (lead) fmt::print("\n");
    return 0;
  });
}

}  // namespace st
