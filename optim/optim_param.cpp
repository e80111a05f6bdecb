#include "optim/optim_param.hpp"

namespace st {

OptimParam make_optim_param(std::string name, Tensor master, Tensor grad, bool weight_decay) {
  auto check = [&](const Tensor& t, const char* role) {
    if (t.dtype() != DType::f32)
      fail(
          "optimizer parameter '{}': {} is {} but optimizers only take fp32 masters and fp32 "
          "gradients (cast with the precision policy, not here)",
          name, role, dtype_name(t.dtype()));
    if (t.is_meta())
      fail("optimizer parameter '{}': {} is on the meta device; materialize it first", name, role);
  };
  check(master, "the master weight");
  check(grad, "the gradient");
  if (master.numel() != grad.numel())
    fail("optimizer parameter '{}': master has {} elements but its gradient {}", name,
         master.numel(), grad.numel());
  return {std::move(name), std::move(master), std::move(grad), weight_decay};
}

}  // namespace st
