#include "launch/model_factory.hpp"

#include <filesystem>

#include "checkpoint/hf_weights.hpp"
#include "core/file_io.hpp"
#include "core/json_parse.hpp"
#include "launch/config_schema.hpp"

namespace st {
namespace fs = std::filesystem;

void apply_matmul_settings(const Config& config) {
  set_bf16_matmul_path(config.precision.bf16_matmul);
  set_fp32_matmul_engine(config.precision.fp32_matmul);
}

std::unique_ptr<Model> make_model(const Config& config, TpSlice slice) {
  const ModelFamily& family = model_family(config.model.family);
  ST_CHECK(slice.ranks == 1 || family.build_slice,
           "model.family = {} has no tensor-parallel plan (validation refuses parallel.tp)",
           family.name);
  auto model = slice.ranks == 1
                   ? family.build(config.model, config.precision.param_dtype)
                   : family.build_slice(config.model, config.precision.param_dtype, slice);
  model->set_activation_checkpointing(config.sharding.activation_checkpointing);
  return model;
}

TpSlice tp_slice_of(const Config& config, int rank, int world_size) {
  const MeshShape shape = mesh_shape(config, world_size);
  return {coord_of(shape, rank).tp, shape.tp, shape.tp > 1 && config.parallel.sequence_parallel};
}

nlohmann::json model_meta_json(const ModelConfig& config, const Model& model) {
  nlohmann::json j = nlohmann::json::object();
  j["family"] = config.family;
  for (const auto& [key, value] : model.hyperparameters()) j[key] = value;
  model_family(config.family).to_meta(config, j);
  return j;
}

namespace {

// The common keys are checked as the [model] section's; errors start with `where`.
ModelConfig checked(const ModelConfig& c, const std::string& where) {
  try {
    validate_model_config(c);
  } catch (const InputError& e) {
    fail_input("{}: {}", where, e.what());
  }
  return c;
}

}  // namespace

std::string model_family_of(const nlohmann::json& model_meta, const std::string& where) {
  if (!model_meta.is_object() || !model_meta.contains("family")) return "gpt2";
  if (!model_meta["family"].is_string())
    fail_input("{}: family = {} must be a string", where, model_meta["family"].dump());
  return model_meta["family"].get<std::string>();
}

ModelConfig model_config_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) fail_input("{}: the model's shape is missing", where);
  ModelConfig c;
  c.family = model_family_of(j, where);
  const ModelFamily& family = [&]() -> const ModelFamily& {
    try {
      return model_family(c.family);
    } catch (const InputError& e) {
      fail_input("{}: {}", where, e.what());
    }
  }();
  c.n_layer = json_int_at(j, "n_layer", where);
  c.n_embd = json_int_at(j, "n_embd", where);
  c.n_head = json_int_at(j, "n_head", where);
  c.block_size = json_int_at(j, "block_size", where);
  c.vocab_size = json_int_at(j, "vocab_size", where);
  // Checkpoints record the padding they were trained with.
  if (j.contains("padded_vocab_size"))
    c.padded_vocab_size = json_int_at(j, "padded_vocab_size", where);
  family.from_meta(j, c, where);
  return checked(c, where);
}

ModelConfig model_config_from_hf(const nlohmann::json& j, const std::string& where) {
  return checked(model_family_for_hf(j, where).from_hf_config(j, where), where);
}

namespace {

// How errors name the config.json beside `weights`.
std::string beside_where(const std::string& weights) {
  return fmt::format("'{}' (beside '{}')", weights_config_json(weights), weights);
}

}  // namespace

ModelConfig model_config_beside(const std::string& weights) {
  const std::string where = beside_where(weights);
  const std::string path = weights_config_json(weights);
  // A Hugging Face config.json is a few KB: a large one is refused before it is read.
  constexpr int64_t kMaxConfigJsonBytes = int64_t(4) << 20;
  std::error_code error;
  const auto bytes = fs::file_size(path, error);
  if (!error && fs::is_regular_file(path) && int64_t(bytes) > kMaxConfigJsonBytes)
    fail_input("{} is {} bytes: not a model's config.json (those are a few KB; at most {} read)",
               where, bytes, kMaxConfigJsonBytes);
  return model_config_from_hf(parse_json_object(read_regular_text_file(path), where), where);
}

namespace {

// Whether `item` (model.KEY=VALUE) set on the file's config leaves every parameter's name and
// shape as they are (model.head_dim = 8 where hidden 32 / 4 heads is 8 already).
bool same_parameters(const Config& file, const std::string& item) {
  Config probe = file;
  apply_override(probe, item);
  if (probe.model.family != file.model.family) return false;
  try {
    validate_config(probe);
  } catch (const InputError&) {
    return false;
  }
  const auto probed = make_model(probe), filed = make_model(file);  // specs only, no memory
  const auto& a = probed->param_specs();
  const auto& b = filed->param_specs();
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].name != b[i].name || a[i].shape != b[i].shape) return false;
  return true;
}

}  // namespace

void adopt_init_from_model(Config& config, const std::vector<std::string>& overrides) {
  const std::string& weights = config.training.init_from;
  if (weights.empty()) return;
  // Text is tokenized as the folder's model was, unless data.tokenizer names another.
  if (config.data.tokenizer.empty() && !config.data.path.empty())
    config.data.tokenizer = weights_tokenizer_json(weights);
  if (!fs::exists(weights_config_json(weights))) return;
  Config file = config;
  file.model = model_config_beside(weights);
  // Not in a config.json: the padding the run asks for.
  file.model.padded_vocab_size = config.model.padded_vocab_size;
  const std::string where = beside_where(weights);
  for (const std::string& item : overrides) {
    const std::string key = item.substr(0, item.find('='));
    if (key.rfind("model.", 0) != 0 || key == "model.padded_vocab_size") continue;
    const KeySpec& spec = find_key(key, "command line");
    const std::string given = spec.show(config), says = spec.show(file);
    if (given != says && !same_parameters(file, item))
      fail_input(
          "{} says {} = {}, but this run has {} = {}: the weights are of another model "
          "shape",
          where, key.substr(6), says, key, given);
  }
  config.model = file.model;
  validate_config(config);  // the model came from a file
}

}  // namespace st
