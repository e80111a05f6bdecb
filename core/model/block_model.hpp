#pragma once
// A model made of repeated blocks between a root unit (embedding, head) gets activation
// checkpointing by declaring its blocks: it writes each block's forward as steps labelled by
// the kind of tensor they produce and declares its per-block activations with the same
// labels. BlockModel then decides what is stored per block and what one shared set holds,
// drives the blocks with the unit hooks, and before each block's backward re-runs exactly the
// steps whose outputs were not kept. No autograd: the labels are the whole contract, and the
// tests' bitwise comparison across modes is what checks them.
#include <cstdint>
#include <vector>

#include "core/model/model.hpp"
#include "core/tensor.hpp"

namespace st {

enum class BlockTensor {
  output,  // the block's output (the next block's input): always kept, never recomputed
  kept,    // matmul outputs and the residual stream: kept unless checkpointing is full
  cheap,   // elementwise and attention-core outputs: kept only without checkpointing
};

// Whether `mode` stores a tensor of kind `t` per block (else one copy shared by all blocks).
bool kept_per_block(ActivationCheckpointing mode, BlockTensor t);

// One pass over a block: its forward, or its recomputation before its backward.
struct BlockPass {
  ActivationCheckpointing mode = ActivationCheckpointing::none;
  bool recompute = false;
  // Whether this pass runs the step producing a tensor of kind `t`: the forward runs every
  // step; a recomputation only those whose outputs were not kept.
  bool runs(BlockTensor t) const { return !recompute || !kept_per_block(mode, t); }
};

class BlockModel : public Model {
 public:
  void set_activation_checkpointing(ActivationCheckpointing mode) override { mode_ = mode; }
  ActivationCheckpointing activation_checkpointing() const { return mode_; }
  // activation_bytes() under another mode (for budgets that compare them).
  virtual int64_t activation_bytes_for(int64_t B, int64_t T,
                                       ActivationCheckpointing mode) const = 0;
  int64_t activation_bytes(int64_t B, int64_t T) const override {
    return activation_bytes_for(B, T, mode_);
  }

  // For a family's activations type: the per-block views of one activation of kind `kind`: `blocks`
  // tensors made by `make()` when the mode keeps the kind per block, else one made once and shared
  // by every block.
  template <class Make>
  static std::vector<Tensor> per_block(ActivationCheckpointing mode, BlockTensor kind,
                                       int64_t blocks, Make&& make) {
    std::vector<Tensor> views;
    for (int64_t l = 0; l < blocks; ++l)
      views.push_back(l == 0 || kept_per_block(mode, kind) ? make() : views.front());
    return views;
  }

 protected:
  virtual int64_t num_blocks() const = 0;
  // A block's forward and backward work (`per_token`: one token's forward, FLOPs and bytes)
  // over `tokens`, the backward twice the forward plus what this mode recomputes: the whole
  // forward (full), or its cheap elementwise half of the bytes (selective).
  void set_block_work(ModelWork& w, SegmentWork per_token, double tokens) const;
  // The unit block l belongs to (unit 0 is the root): Model::unit_of_block.
  int block_unit(int64_t l) const { return unit_of_block(l); }
  virtual void block_forward(int64_t l, const BlockPass& pass) = 0;
  virtual void block_backward(int64_t l) = 0;

  // Blocks [first, end)'s forward in order (every block's by default), each between its unit's
  // hooks.
  void forward_blocks(UnitHooks& hooks, int64_t first = 0, int64_t end = -1);
  // Their backward in reverse order, each between its unit's hooks (so its parameters are
  // gathered), recomputing what the mode did not keep first.
  void backward_blocks(UnitHooks& hooks, int64_t first = 0, int64_t end = -1);

 private:
  ActivationCheckpointing mode_ = ActivationCheckpointing::none;
};

}  // namespace st
