#pragma once
// The model a config describes: the one place that turns the [model] section into a Model.
// Trainers, budgets and checkpoints see only the Model interface; a new model is added here
// (see CONTRIBUTING.md).
#include <memory>

#include "core/model/model.hpp"
#include "launch/config.hpp"

namespace st {

// Parameter specs only (the meta picture): nothing is materialized until a sharder binds it.
// Computes in precision.param_dtype.
std::unique_ptr<Model> make_model(const Config& config);

}  // namespace st
