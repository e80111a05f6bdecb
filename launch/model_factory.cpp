#include "launch/model_factory.hpp"

#include "core/model/gpt.hpp"

namespace st {

std::unique_ptr<Model> make_model(const Config& config) {
  return std::make_unique<GPT>(config.model, config.precision.param_dtype);
}

}  // namespace st
