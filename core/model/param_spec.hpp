#pragma once
// What a model declares about each parameter, before any memory exists.
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.hpp"

namespace st {

enum class InitKind : uint8_t { normal, zeros, ones };

struct ParamSpec {
  std::string name;  // Hugging Face name, e.g. "transformer.h.0.attn.c_attn.weight"
  Shape shape;
  InitKind init = InitKind::zeros;
  float init_std = 0.f;  // for InitKind::normal (mean 0)
  bool weight_decay = false;
  int unit = 0;  // the FSDP unit this parameter belongs to
  int64_t numel() const { return shape_numel(shape); }
};

// Elements [first, first + n) of parameter `param_index`, each a pure function of
// (seed, param_index, element index): the same values whoever computes them, however split.
void init_param_elements(const ParamSpec& spec, uint64_t seed, uint64_t param_index, uint64_t first,
                         size_t n, float* dst);

// Called by models around each unit's work, so a sharder can gather and free parameters.
// Root unit 0 is entered first and left last; block units are entered in order for the
// forward and in reverse for the backward.
class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  virtual void before_forward(int /*unit*/) {}
  virtual void after_forward(int /*unit*/) {}
  virtual void before_backward(int /*unit*/) {}
  virtual void after_backward(int /*unit*/) {}
};

// A parameter as the model sees it during compute: its value in the compute dtype and its
// FP32 gradient accumulator. Whoever owns the memory binds these before the unit runs.
struct BoundParam {
  Tensor value;
  Tensor grad;
};

// The tokens of one micro-batch: inputs and next-token targets, both int32 [B, T].
struct Batch {
  Tensor inputs;
  Tensor targets;
  int64_t B() const { return inputs.dim(0); }
  int64_t T() const { return inputs.dim(1); }
};

// The interface every trainable model offers to trainers and sharders.
class Model {
 public:
  virtual ~Model() = default;
  virtual const std::vector<ParamSpec>& param_specs() const = 0;
  virtual int num_units() const = 0;
  virtual DType compute_dtype() const = 0;

  // Forward and backward of one micro-batch. Gradients are added into the bound grads, scaled
  // by `grad_scale` (1 / tokens in the global step). Returns the sum of the token losses.
  virtual double forward_backward(const Batch& batch, float grad_scale, UnitHooks& hooks) = 0;
  // Forward only; returns the sum of the token losses.
  virtual double forward_loss(const Batch& batch, UnitHooks& hooks) = 0;
  // Matmul FLOPs of one forward+backward over one token (for MFU).
  virtual double flops_per_token() const = 0;

  // `grad` may be left undefined for forward-only use (touching it is then an error).
  void bind(size_t index, Tensor value, Tensor grad);
  // Forgets the memory of parameter `index` (a sharder freeing its unsharded buffer), so a
  // use after the free is an error naming the parameter instead of a read of reused memory.
  void unbind(size_t index);
  const BoundParam& param(size_t index) const;

 protected:
  std::vector<BoundParam> bound_;
};

}  // namespace st
