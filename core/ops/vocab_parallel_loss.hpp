#pragma once
// The cross-entropy of logits split by vocabulary over a tensor-parallel group (Megatron's
// vocabulary-parallel loss): each rank holds its columns of the padded vocabulary for every row,
// none a whole row. Each row's maximum is reduced over the group (max), then the sums of
// exponentials and the target's logit (sum), so losses and softmax normalizers come out whole,
// the same on every rank; the gradient is cross_entropy_backward_slice
// (core/ops/cross_entropy.hpp) with those normalizers.
#include <cstdint>

#include "core/model/tensor_parallel.hpp"

namespace st {

// Columns [first, first + cols) of a padded vocabulary whose first V columns are real.
struct VocabSlice {
  int64_t first = 0, cols = 0, V = 0;
  // How many of the slice's columns are real.
  int64_t real() const;
};

// The slice tensor-parallel rank t of `ranks` holds of a padded vocabulary Vp (divisible by
// ranks) with V real columns.
VocabSlice vocab_slice(int64_t V, int64_t Vp, int t, int ranks);

// losses and shifts (FP32 [M]): each row's loss and max + log Σ exp(logit - max), whole, from
// this rank's logits [M, s.cols] (FP32). Targets must be in [0, V). Returns the losses' sum.
double vocab_parallel_cross_entropy_forward(const Tensor& losses, const Tensor& shifts,
                                            const float* logits, const int32_t* targets, int64_t M,
                                            const VocabSlice& s, TensorParallel& tp);

}  // namespace st
