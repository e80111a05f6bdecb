#pragma once
// Optimizers over FP32 (master, grad) spans: AdamW and SGD with momentum.
#include <memory>
#include <string>
#include <vector>

#include "optim/optim_param.hpp"

namespace st {

enum class OptimizerKind { adamw, sgd };
const char* optimizer_name(OptimizerKind kind);
// FP32 state buffers per parameter element (AdamW 2, SGD 1): what a memory budget needs to
// know before any optimizer exists.
int states_per_element(OptimizerKind kind);

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::adamw;
  float beta1 = 0.9f;  // AdamW beta1; SGD momentum
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update with learning rate `lr` from the gradients times `grad_scale` (a clip factor,
  // applied in the update's own pass instead of a separate one over the gradients, which are
  // left as they are).
  virtual void step(float lr, float grad_scale = 1.0f) = 0;
  // Named FP32 state buffers (e.g. "exp_avg" of each span), for checkpoints.
  virtual std::vector<std::pair<std::string, Tensor>> state() = 0;
  // FP32 state buffers per parameter element (AdamW 2, SGD 1), for memory budgets.
  virtual int states_per_element() const = 0;
  int64_t steps_taken() const { return steps_; }
  // For resuming from a checkpoint: bias correction continues from here.
  void set_steps_taken(int64_t steps) { steps_ = steps; }
  const std::vector<OptimParam>& params() const { return params_; }

 protected:
  explicit Optimizer(std::vector<OptimParam> params) : params_(std::move(params)) {}
  std::vector<OptimParam> params_;
  int64_t steps_ = 0;
};

// Decoupled weight decay (as torch.optim.AdamW), bias-corrected moments; spans with
// weight_decay = false are not decayed. One fused pass over master, grad, m and v.
class AdamW final : public Optimizer {
 public:
  AdamW(std::vector<OptimParam> params, const OptimizerConfig& config);
  void step(float lr, float grad_scale = 1.0f) override;
  std::vector<std::pair<std::string, Tensor>> state() override;
  int states_per_element() const override { return st::states_per_element(OptimizerKind::adamw); }

 private:
  OptimizerConfig config_;
  std::vector<Tensor> m_, v_;
};

// SGD with momentum (beta1) and decoupled weight decay.
class SGD final : public Optimizer {
 public:
  SGD(std::vector<OptimParam> params, const OptimizerConfig& config);
  void step(float lr, float grad_scale = 1.0f) override;
  std::vector<std::pair<std::string, Tensor>> state() override;
  int states_per_element() const override { return st::states_per_element(OptimizerKind::sgd); }

 private:
  OptimizerConfig config_;
  std::vector<Tensor> momentum_;
};

std::unique_ptr<Optimizer> make_optimizer(std::vector<OptimParam> params,
                                          const OptimizerConfig& config);

}  // namespace st
