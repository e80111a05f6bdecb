#include "core/model/decoder_activations.hpp"

#include <string>

#include "core/error.hpp"

#include "core/ops/attention_bf16.hpp"

namespace st {

void DecoderActivations::declare_common(ActivationArena& arena, DType dt, int64_t L, int64_t C,
                                        int64_t Vp, const char* attn, const TpSlice& slice) {
  const int64_t H = att.H, Q = att.H * att.head_size;
  const std::string probs_name = std::string(attn) + ".probs", y_name = std::string(attn) + ".y";
  const bool sp = slice.sequence_parallel && slice.ranks > 1;
  rows = sp ? B * T / slice.ranks : B * T;
  x.clear();
  ST_CHECK(blocks.first >= 0 && blocks.first < blocks.end && blocks.end <= L,
           "activations of blocks [{}, {}) of {}", blocks.first, blocks.end, L);
  for (int64_t l = 0; l <= L; ++l)
    x.push_back(l >= blocks.first && l <= blocks.end ? arena.f32("x", {rows, C}) : Tensor());
  using enum BlockTensor;
  x_mid = layers(kept, L, [&] { return arena.f32("x_mid", {rows, C}); });
  probs = layers(cheap, L, [&] { return arena.make(probs_name.c_str(), {B, H, T, T}, dt); });
  att_y = layers(kept, L, [&] { return arena.make(y_name.c_str(), {B, T, Q}, dt); });
  if (blocks.last_stage) {
    logits = arena.f32("logits", {B * T, Vp});
    losses = arena.f32("losses", {B * T});
    row_shift = arena.f32("row_shift", {B * T});
  }
  proj_out = arena.make("proj_out", {B, T, C}, dt);
  dx = arena.f32("d_x", {rows, C});
  // The row-parallel partial sums and input gradients TP sums (or gathers) in shared memory.
  const bool tp = slice.ranks > 1;
  d_small = tp_operand(arena, tp, "d_small", {B, T, std::max(C, Q)}, DType::f32);
  tp_sum = tp_operand(arena, tp, "tp.partial_sums", tp ? Shape{B, T, C} : Shape{0}, DType::f32);
  sp_rows = arena.f32("sp.reduced_rows", sp ? Shape{rows, C} : Shape{0});
  // The AVX512-BF16 attention keeps its tiles per thread: no scores, d_y or d_s scratch.
  const bool general = !attention_bf16_kernels_run(att, dt);
  att_scores = arena.f32("attn.scores", general ? Shape{B, H, T, T} : Shape{0});
  att_dy = arena.make("attn.d_y", general ? Shape{B, T, Q} : Shape{0}, dt);
  att_ds = arena.make("attn.d_s", general ? Shape{B, H, T, T} : Shape{0}, dt);
}

}  // namespace st
