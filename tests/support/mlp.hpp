#pragma once
// A small model for tests: token embedding -> fc1 -> GELU -> fc2 -> cross-entropy (a bigram MLP).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/model/model.hpp"

namespace st {

struct MLPConfig {
  int64_t vocab_size = 16;
  int64_t n_embd = 8;
  int64_t hidden = 32;
};

class MLP final : public Model {
 public:
  MLP(const MLPConfig& config, DType compute_dtype);
  const std::vector<ParamSpec>& param_specs() const override { return specs_; }
  int num_units() const override { return 3; }  // root (embedding), fc1, fc2
  DType compute_dtype() const override { return dtype_; }
  double forward_backward(const Batch& batch, float grad_scale, UnitHooks& hooks) override;
  double forward_loss(const Batch& batch, UnitHooks& hooks) override;
  double flops_per_token() const override;
  int64_t activation_bytes(int64_t B, int64_t T) const override;
  std::string describe() const override;
  std::vector<std::pair<std::string, int64_t>> hyperparameters() const override;

 private:
  double run(const Batch& batch, float grad_scale, bool backward, UnitHooks& hooks);

  MLPConfig config_;
  DType dtype_;
  std::vector<ParamSpec> specs_;
};

}  // namespace st
