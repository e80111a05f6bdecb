#include "launch/model_factory.hpp"

#include <filesystem>

#include "core/file_io.hpp"
#include "core/model/gpt.hpp"
#include "sharding/json_parse.hpp"

namespace st {
namespace fs = std::filesystem;

std::string config_json_beside(const std::string& weights) {
  return (fs::path(weights).parent_path() / "config.json").string();
}

void apply_matmul_settings(const Config& config) {
  set_bf16_matmul_path(config.precision.bf16_matmul);
  set_fp32_matmul_engine(config.precision.fp32_matmul);
}

std::unique_ptr<Model> make_model(const Config& config) {
  auto model = std::make_unique<GPT>(config.model, config.precision.param_dtype);
  model->set_activation_checkpointing(config.sharding.activation_checkpointing);
  return model;
}

GPTConfig model_config_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) fail_input("{}: the model's shape is missing", where);
  auto get = [&](const char* key) {
    if (!j.contains(key)) fail_input("{}: '{}' is missing", where, key);
    return json_int(j.at(key), fmt::format("{}: {}", where, key), INT64_MIN, INT64_MAX);
  };
  GPTConfig c;
  c.n_layer = get("n_layer");
  c.n_embd = get("n_embd");
  c.n_head = get("n_head");
  c.block_size = get(j.contains("block_size") ? "block_size" : "n_positions");
  c.vocab_size = get("vocab_size");
  // Checkpoints record the padding they were trained with; Hugging Face configs have none.
  if (j.contains("padded_vocab_size")) c.padded_vocab_size = get("padded_vocab_size");
  try {
    validate_model_config(c);
  } catch (const InputError& e) {
    fail_input("{}: {}", where, e.what());
  }
  return c;
}

void check_weights_config(const std::string& weights, const GPTConfig& model) {
  const fs::path path = config_json_beside(weights);
  if (!fs::exists(path)) return;
  const std::string where = fmt::format("'{}' (beside '{}')", path.string(), weights);
  const GPTConfig file =
      model_config_from_json(parse_json_object(read_text_file(path.string()), where), where);
  const std::pair<const char*, int64_t GPTConfig::*> fields[] = {
      {"n_layer", &GPTConfig::n_layer},
      {"n_embd", &GPTConfig::n_embd},
      {"n_head", &GPTConfig::n_head},
      {"block_size", &GPTConfig::block_size},
      {"vocab_size", &GPTConfig::vocab_size}};
  for (const auto& [key, field] : fields)
    if (file.*field != model.*field)
      fail_input(
          "{} says {} = {}, but this run has model.{} = {}: the weights are of another "
          "model shape",
          where, key, file.*field, key, model.*field);
}

}  // namespace st
