#pragma once
// A model that is not GPT: a deep MLP regressor, x [B, D] -> y [B, 1], squared error. Each
// hidden layer is one FSDP unit; the input and output layers form the root unit.
#include <string>
#include <utility>
#include <vector>

#include "core/model/model.hpp"

struct RegressorShape {
  int64_t inputs = 16, hidden = 256, layers = 6;
};

class DeepRegressor final : public st::Model {
 public:
  DeepRegressor(RegressorShape shape, st::DType compute_dtype);

  const std::vector<st::ParamSpec>& param_specs() const override { return specs_; }
  int num_units() const override { return int(shape_.layers) + 1; }
  st::DType compute_dtype() const override { return dtype_; }
  // batch.inputs: FP32 [B, D]; batch.targets: FP32 [B, 1]. Returns the sum of 0.5 (y - t)^2.
  double forward_backward(const st::Batch& batch, float grad_scale, st::UnitHooks& hooks) override;
  double forward_loss(const st::Batch& batch, st::UnitHooks& hooks) override;
  double flops_per_token() const override;
  int64_t activation_bytes(int64_t B, int64_t T) const override;
  std::string describe() const override;
  std::vector<std::pair<std::string, int64_t>> hyperparameters() const override;

 private:
  double run(const st::Batch& batch, float grad_scale, bool backward, st::UnitHooks& hooks);

  RegressorShape shape_;
  st::DType dtype_;
  std::vector<st::ParamSpec> specs_;
};
