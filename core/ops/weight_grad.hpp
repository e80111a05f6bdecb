#pragma once
// The weight-gradient matmuls of the linear ops (d_weight += the input's transpose times the
// output gradient, or its transpose), run through one function so a zero-bubble pipeline can
// split a backward in two (Qi et al., ZB-H1): inside a DeferWeightGrads scope on this thread
// each is not run but recorded, its two operands copied (the activations and gradient scratch
// they point into are reused before it runs); DeferredWeightGrads::run computes them later, in
// the recorded order. Everything else of the backward (input gradients, norms', biases' and
// embeddings' gradients) runs at once.
#include <cstdint>
#include <vector>

#include "core/ops/matmul.hpp"
#include "core/tensor.hpp"

namespace st {

class DeferredWeightGrads {
 public:
  // Runs every recorded matmul in order, then forgets them (and their copies).
  void run();
  bool empty() const { return items_.empty(); }
  int64_t bytes() const { return bytes_; }  // held by the copies

 private:
  friend void weight_grad_gemm(const MatView& a, const MatView& b, const MatView& c);
  struct Item {
    Tensor a_copy, b_copy;
    MatView a, b, c;
  };
  std::vector<Item> items_;
  int64_t bytes_ = 0;
};

// While alive, this thread's weight_grad_gemm calls are recorded into `into`.
class DeferWeightGrads {
 public:
  explicit DeferWeightGrads(DeferredWeightGrads& into);
  ~DeferWeightGrads();
  DeferWeightGrads(const DeferWeightGrads&) = delete;
  DeferWeightGrads& operator=(const DeferWeightGrads&) = delete;

 private:
  DeferredWeightGrads* outer_;
};

// c (FP32) += a · b: run now, or recorded when a DeferWeightGrads scope is active.
void weight_grad_gemm(const MatView& a, const MatView& b, const MatView& c);

}  // namespace st
