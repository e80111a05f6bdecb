#pragma once
// What every decoder family's activation set holds and declares alike: the residual streams,
// the attention's saved probabilities, output and scratch, the head's logits and losses, and
// the gradient scratch of the residual stream. A family's activations derive from it, set `att`
// and call declare_common first in their declaration pass, then declare their own tensors; the
// family's ActivationArena member comes last, so these exist before it runs.
#include <cstdint>
#include <utility>
#include <vector>

#include "core/model/activation_arena.hpp"
#include "core/model/block_model.hpp"
#include "core/model/param_slice.hpp"
#include "core/ops/attention.hpp"

namespace st {

struct DecoderActivations {
  int64_t B, T;
  ActivationCheckpointing mode;
  // The blocks this set serves (all of them, or a pipeline stage's): per-block tensors exist for
  // them alone (the others are undefined), the head's (logits, losses) on the last stage only.
  StageBlocks blocks;
  AttentionShape att;
  // The residual stream's rows on this rank: B·T, or under sequence parallelism this rank's
  // run of B·T / tp of them (`rows` below).
  int64_t rows = 0;
  std::vector<Tensor> x;      // L+1 residual streams (block inputs and outputs), FP32 [rows,C]
                              // (those of blocks.first..blocks.end)
  std::vector<Tensor> x_mid;  // L, after attention, FP32 [rows,C]
  std::vector<Tensor> probs;  // L, dtype [B,H,T,T]
  std::vector<Tensor> att_y;  // L, dtype [B,T,Q] (Q = H·head size, C unless heads are wider)
  Tensor logits;              // FP32 [B*T, Vp] (gradient in place in backward)
  Tensor losses;              // FP32 [B*T]
  Tensor row_shift;           // FP32 [B*T]: each row's softmax normalizer, forward to backward
  // Scratch shared by all layers.
  Tensor proj_out;  // dtype [B,T,C]
  Tensor dx;        // FP32 [rows,C]: the residual stream's gradient
  Tensor d_small;   // FP32 [B,T,max(C,Q)]: one more
  // Tensor parallelism: FP32 [B,T,C], a row-parallel matmul's partial sums (and, under sequence
  // parallelism, the residual gradient gathered from every rank's rows).
  Tensor tp_sum;
  // Sequence parallelism: FP32 [rows,C], a reduce-scatter's result.
  Tensor sp_rows;
  // FP32 [B,H,T,T]; dtype [B,T,Q]; dtype [B,H,T,T]; empty where the BF16 kernels run.
  Tensor att_scores, att_dy, att_ds;

  AttentionSaved saved(int64_t l) const { return {probs[size_t(l)].raw()}; }
  AttentionScratch scratch() const {
    if (att_scores.numel() == 0) return {nullptr, nullptr, nullptr};
    return {att_scores.data<float>(), att_dy.raw(), att_ds.raw()};
  }

 protected:
  DecoderActivations(int64_t B_, int64_t T_, ActivationCheckpointing mode_,
                     const StageBlocks& blocks_)
      : B(B_), T(T_), mode(mode_), blocks(blocks_) {}

  // Declares the tensors above for L blocks of width C and a head of Vp columns (att set: this
  // rank's heads; Vp: its vocabulary slice) for the tensor-parallel `slice`; the attention's
  // per-layer tensors are named "<attn>.probs" and "<attn>.y".
  void declare_common(ActivationArena& arena, DType dt, int64_t L, int64_t C, int64_t Vp,
                      const char* attn, const TpSlice& slice);
  // L per-layer tensors of `kind`, made by `make()` for this set's blocks (one per block when
  // the mode keeps the kind per block, else one shared by them: BlockModel::per_block),
  // undefined for the others.
  template <class Make>
  std::vector<Tensor> layers(BlockTensor kind, int64_t L, Make&& make) const {
    std::vector<Tensor> views(static_cast<size_t>(L));
    const auto first = size_t(blocks.first);
    for (size_t l = first; l < size_t(blocks.end); ++l)
      views[l] = l == first || kept_per_block(mode, kind) ? make() : views[first];
    return views;
  }
  // A tensor peers read during a TP collective (`collective`: in the arena's shared memory).
  static Tensor tp_operand(ActivationArena& arena, bool collective, const char* name, Shape shape,
                           DType dtype) {
    return collective ? arena.shared(name, std::move(shape), dtype)
                      : arena.make(name, std::move(shape), dtype);
  }
};

}  // namespace st
