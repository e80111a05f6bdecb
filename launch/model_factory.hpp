#pragma once
// The model a config describes: the one place that turns the [model] section into a Model.
// Trainers, budgets and checkpoints see only the Model interface; a new model is added here
// (see CONTRIBUTING.md).
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/model/model.hpp"
#include "launch/config.hpp"

namespace st {

// Parameter specs only (the meta picture): nothing is materialized until a sharder binds it.
// Computes in precision.param_dtype.
std::unique_ptr<Model> make_model(const Config& config);

// Selects the BF16 matmul path and the FP32 matmul engine (precision.bf16_matmul and
// precision.fp32_matmul) for this process: every command that computes calls it once, right
// after loading its config.
void apply_matmul_settings(const Config& config);

// The model shape stored in a JSON object (a checkpoint's meta.model, or Hugging Face's
// config.json, where the context is `n_positions`), checked as the [model] keys are; an
// InputError that starts with `where` otherwise.
GPTConfig model_config_from_json(const nlohmann::json& j, const std::string& where);

// The config.json beside a weights file (Hugging Face's layout: one folder per model).
std::string config_json_beside(const std::string& weights);

// When a config.json lies beside the safetensors file `weights`, it must describe `model`
// (a file from a different model would otherwise load whatever tensors happen to match).
void check_weights_config(const std::string& weights, const GPTConfig& model);

}  // namespace st
