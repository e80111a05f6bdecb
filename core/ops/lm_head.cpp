#include "core/ops/lm_head.hpp"

#include "core/ops/cross_entropy.hpp"
#include "core/ops/linear.hpp"
#include "core/ops/matmul.hpp"

namespace st {

double lm_head_forward(float* logits, float* losses, const void* x, const void* head,
                       const int32_t* targets, const LmHeadShape& s, DType dtype, float* shifts) {
  gemm(1, MatView::row_major(x, dtype, s.M, s.C), MatView::row_major(head, dtype, s.Vp, s.C).t(),
       MatView::row_major(logits, DType::f32, s.M, s.Vp));
  cross_entropy_forward(losses, logits, targets, s.M, s.V, s.Vp, shifts);
  double sum = 0;
  for (int64_t i = 0; i < s.M; ++i) sum += losses[i];
  return sum;
}

void lm_head_backward(float* d_x, float* d_head, float* logits, void* scratch, const void* x,
                      const void* head, const int32_t* targets, float grad_scale,
                      const LmHeadShape& s, DType dtype, const float* shifts) {
  // logits = x · headᵀ: d_x = d_logits · head, d_head += d_logitsᵀ · x.
  const LinearPart part[] = {{head, d_head, s.Vp}};
  // The gradient in place of the FP32 logits, or (BF16) rounded as it is written into the
  // matmuls' operand.
  void* grad = dtype == DType::f32 ? static_cast<void*>(logits) : scratch;
  cross_entropy_backward(grad, dtype, logits, targets, grad_scale, s.M, s.V, s.Vp, shifts);
  fused_linear_backward_from(d_x, grad, x, part, s.M, s.C, dtype);
}

}  // namespace st
