#pragma once
// The model a config describes: the one place that turns the [model] section into a Model.
// Trainers, budgets and checkpoints see only the Model interface; a new model is added here
// (see CONTRIBUTING.md).
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/model/model.hpp"
#include "core/model/param_slice.hpp"
#include "launch/config.hpp"

namespace st {

// Parameter specs only (the meta picture): nothing is materialized until a sharder binds it.
// Computes in precision.param_dtype. With `slice` (parallel.tp > 1): TP rank slice.rank's
// slices of the parameters (tp_slice_of says which a rank holds).
std::unique_ptr<Model> make_model(const Config& config, TpSlice slice = {});
// The slices rank `rank` of `world_size` holds under the config's mesh (parallel.tp).
TpSlice tp_slice_of(const Config& config, int rank, int world_size);

// Selects the BF16 matmul path and the FP32 matmul engine (precision.bf16_matmul and
// precision.fp32_matmul) for this process: every command that computes calls it once, right
// after loading its config.
void apply_matmul_settings(const Config& config);

// A checkpoint's meta.model for this model and config (the family, Model::hyperparameters()
// and what the family adds), and the config read back from one, checked as the [model] keys
// are (a manifest without `family` is GPT-2's); an InputError that starts with `where`.
nlohmann::json model_meta_json(const ModelConfig& config, const Model& model);
// The family a checkpoint's meta.model records ("gpt2" when absent: written before families).
std::string model_family_of(const nlohmann::json& model_meta, const std::string& where);
ModelConfig model_config_from_json(const nlohmann::json& j, const std::string& where);
// The model shape of Hugging Face's config.json (its family from `model_type`), checked.
ModelConfig model_config_from_hf(const nlohmann::json& j, const std::string& where);
// The model shape of the config.json of `weights` (a model folder's, or the one beside a file).
ModelConfig model_config_beside(const std::string& weights);

// training.init_from names weights with a config.json (a model folder's, or one beside the
// file): the run's [model] becomes the model it describes, so its keys need not be repeated. A
// model.* key given on the command line (`overrides`) must say the same, or an InputError names
// both values.
void adopt_init_from_model(Config& config, const std::vector<std::string>& overrides);

}  // namespace st
