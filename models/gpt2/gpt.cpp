#include "models/gpt2/gpt.hpp"

#include <algorithm>
#include <cmath>

#include "core/model/activation_arena.hpp"
#include "core/model/decoder_activations.hpp"
#include "core/model/decoder_model_impl.hpp"
#include "core/ops/cross_entropy.hpp"
#include "core/ops/elementwise.hpp"
#include "core/ops/embedding.hpp"
#include "core/ops/gelu.hpp"
#include "core/ops/layernorm.hpp"
#include "core/ops/linear.hpp"
#include "core/ops/lm_head.hpp"
#include "core/ops/matmul.hpp"
#include "core/ops/vocab_parallel_loss.hpp"
#include "models/gpt2/parallelize.hpp"

namespace st {

// Everything one micro-batch of shape [B, T] keeps from forward to backward, plus scratch, in
// one ActivationArena.
// With activation checkpointing, the per-layer vectors of recomputed kinds hold L views of one
// shared tensor (BlockModel::per_block).
struct GPTActivations : DecoderActivations {
  std::vector<Tensor> ln1, ln2;                                // L, dtype [B,T,C]
  std::vector<Tensor> ln1_mean, ln1_rstd, ln2_mean, ln2_rstd;  // L, FP32 [B*T]
  std::vector<Tensor> qkv;                                     // L, dtype [B,T,3C]
  std::vector<Tensor> fc, fc_gelu;                             // L, dtype [B,T,4C]
  Tensor lnf, lnf_mean, lnf_rstd;                              // dtype [B,T,C]; FP32 [B*T]
  // Scratch shared by all layers.
  Tensor d_qkv;           // FP32 [B,T,3C]
  Tensor d_big;           // FP32 [B,T,4C]
  Tensor cast_scratch;    // dtype [B*T, max(4C, V)]
  ActivationArena arena;  // last: its declaration passes fill the tensors above

  // On Device::meta nothing is allocated: that is how activation_bytes() counts. Under tensor
  // parallelism (tp > 1) the heads, the MLP's width and the vocabulary are one rank's slice
  // (widths 3C/tp, 4C/tp, Vp/tp below written as 3C, 4C, Vp).
  GPTActivations(const GPTConfig& cfg, DType dt, int64_t B_, int64_t T_,
                 ActivationCheckpointing mode_, const TpSlice& slice, const StageBlocks& blocks_,
                 Device device, const ActivationArena::SharedAllocator& shared = {})
      : DecoderActivations(B_, T_, mode_, blocks_),
        arena(
            "GPT activations", device, [&](ActivationArena& a) { declare(cfg, dt, slice, a); },
            shared) {}

  void declare(const GPTConfig& cfg, DType dt, const TpSlice& slice, ActivationArena& arena) {
    const int64_t tp = slice.ranks, C = cfg.n_embd, L = cfg.n_layer, H = cfg.n_head / tp,
                  Vp = cfg.padded_vocab() / tp, Cl = C / tp;
    att = {B, T, H, C / cfg.n_head};  // query blocks of AttentionShape::block rows
    declare_common(arena, dt, L, C, Vp, "attn", slice);
    auto f32 = [&](const char* name, Shape s) { return arena.f32(name, std::move(s)); };
    auto act = [&](const char* name, Shape s) { return arena.make(name, std::move(s), dt); };
    // The norms' outputs, gathered in place from every rank's rows under sequence parallelism.
    auto gathered = [&](const char* name) {
      return tp_operand(arena, slice.sequence_parallel && tp > 1, name, {B, T, C}, dt);
    };
    // Each per-layer activation with the kind of step that produces it (BlockTensor).
    using enum BlockTensor;
    ln1 = layers(cheap, L, [&] { return gathered("ln_1.out"); });
    ln2 = layers(cheap, L, [&] { return gathered("ln_2.out"); });
    // The norms' statistics are of the residual stream's rows (this rank's under sequence
    // parallelism); their outputs of all B·T rows, the column-parallel matmuls' inputs.
    ln1_mean = layers(cheap, L, [&] { return f32("ln_1.mean", {rows}); });
    ln1_rstd = layers(cheap, L, [&] { return f32("ln_1.rstd", {rows}); });
    ln2_mean = layers(cheap, L, [&] { return f32("ln_2.mean", {rows}); });
    ln2_rstd = layers(cheap, L, [&] { return f32("ln_2.rstd", {rows}); });
    qkv = layers(kept, L, [&] { return act("attn.qkv", {B, T, 3 * Cl}); });
    fc = layers(kept, L, [&] { return act("mlp.fc", {B, T, 4 * Cl}); });
    fc_gelu = layers(cheap, L, [&] { return act("mlp.gelu", {B, T, 4 * Cl}); });
    lnf = gathered("ln_f.out");
    lnf_mean = f32("ln_f.mean", {rows});
    lnf_rstd = f32("ln_f.rstd", {rows});
    d_qkv = f32("d_qkv", {B, T, 3 * Cl});
    d_big = f32("d_big", {B, T, 4 * Cl});
    cast_scratch = act("grad_cast", {B * T, std::max({C, 4 * Cl, Vp})});
  }
};

template class DecoderModel<GPTConfig, GPTActivations>;

GPT::GPT(const GPTConfig& cfg, DType compute_dtype, TpSlice slice)
    : DecoderModel(cfg, compute_dtype, "GPT", slice) {
  const int64_t C = cfg.n_embd, L = cfg.n_layer, V = cfg.vocab_size, Vp = cfg.padded_vocab();
  if (C % cfg.n_head != 0)
    fail_input("GPT: n_embd {} is not divisible by n_head {}", C, cfg.n_head);
  if (Vp < V) fail_input("GPT: padded_vocab_size {} is smaller than vocab_size {}", Vp, V);
  const float std = 0.02f;
  const float proj_std = 0.02f / std::sqrt(2.0f * float(L));
  const auto normal = [&](std::string name, Shape shape, float init_std, bool decay) {
    return add_param(std::move(name), std::move(shape), InitKind::normal, init_std, decay);
  };
  const auto ones = [&](std::string name, int64_t n) {
    return add_param(std::move(name), {n}, InitKind::ones, 0, false);
  };
  const auto zeros = [&](std::string name, int64_t n) {
    return add_param(std::move(name), {n}, InitKind::zeros, 0, false);
  };
  p_.wte = normal("transformer.wte.weight", {Vp, C}, std, false);
  specs_[p_.wte].real_rows = V;  // the padding rows stay zero and are never exported
  p_.wpe = normal("transformer.wpe.weight", {cfg.block_size, C}, std, false);
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "transformer.h." + std::to_string(l) + ".";
    BlockParams b{};
    b.ln_1_weight = ones(p + "ln_1.weight", C);
    b.ln_1_bias = zeros(p + "ln_1.bias", C);
    b.c_attn_weight = normal(p + "attn.c_attn.weight", {C, 3 * C}, std, true);
    b.c_attn_bias = zeros(p + "attn.c_attn.bias", 3 * C);
    b.attn_proj_weight = normal(p + "attn.c_proj.weight", {C, C}, proj_std, true);
    b.attn_proj_bias = zeros(p + "attn.c_proj.bias", C);
    b.ln_2_weight = ones(p + "ln_2.weight", C);
    b.ln_2_bias = zeros(p + "ln_2.bias", C);
    b.c_fc_weight = normal(p + "mlp.c_fc.weight", {C, 4 * C}, std, true);
    b.c_fc_bias = zeros(p + "mlp.c_fc.bias", 4 * C);
    b.mlp_proj_weight = normal(p + "mlp.c_proj.weight", {4 * C, C}, proj_std, true);
    b.mlp_proj_bias = zeros(p + "mlp.c_proj.bias", C);
    p_.h.push_back(b);
  }
  p_.ln_f_weight = ones("transformer.ln_f.weight", C);
  p_.ln_f_bias = zeros("transformer.ln_f.bias", C);
  for (const BlockParams& b : p_.h)
    norm_params_.insert(norm_params_.end(),
                        {b.ln_1_weight, b.ln_1_bias, b.ln_2_weight, b.ln_2_bias});
  norm_params_.insert(norm_params_.end(), {p_.ln_f_weight, p_.ln_f_bias});
  parallelize_gpt(cfg, specs_);  // FSDP units and placements: models/gpt2/parallelize.cpp
  if (slice.ranks > 1) {
    if (cfg.n_head % slice.ranks != 0)
      fail_input("GPT: n_head {} is not divisible by the tensor-parallel degree {}", cfg.n_head,
                 slice.ranks);
    if (Vp % slice.ranks != 0)
      fail_input("GPT: the padded vocabulary {} is not divisible by the tensor-parallel degree {}",
                 Vp, slice.ranks);
    slice_param_specs(specs_, slice.rank, slice.ranks);
  }
}

// out_x = x_in + in · W + b for a projection back to the residual width C (W: Conv1D's [K, C];
// row-parallel under tensor parallelism).
void GPT::projection_residual(float* out_x, const float* x_in, const void* in, size_t weight,
                              size_t bias, int64_t M, int64_t K) {
  Activations& a = *acts_;
  const int64_t C = config_.n_embd;
  if (tensor_parallel()) {
    row_parallel_residual(out_x, x_in, in, M, K, MatView::row_major(w(weight), dtype_, K, C),
                          w(bias));
    return;
  }
  linear_forward(a.proj_out.raw(), in, w(weight), w(bias), M, K, C, dtype_);
  residual_add(out_x, x_in, a.proj_out.raw(), dtype_, size_t(M * C));
}

GPT::~GPT() = default;

std::string GPT::describe() const {
  const GPTConfig& c = config_;
  return fmt::format(
      "GPT L={} C={} H={} T={} V={}{}", c.n_layer, c.n_embd, c.n_head, c.block_size, c.vocab_size,
      c.padded_vocab() == c.vocab_size ? std::string()
                                       : fmt::format(" (padded to {})", c.padded_vocab()));
}

std::vector<std::pair<std::string, int64_t>> GPT::hyperparameters() const {
  const GPTConfig& c = config_;
  return {{"n_layer", c.n_layer},       {"n_embd", c.n_embd},
          {"n_head", c.n_head},         {"block_size", c.block_size},
          {"vocab_size", c.vocab_size}, {"padded_vocab_size", c.padded_vocab()}};
}

double GPT::flops_per_token() const {
  // 2 FLOPs per multiply-add, x3 for forward + backward (two matmuls per forward matmul).
  const double C = double(config_.n_embd), L = double(config_.n_layer);
  const double V = double(config_.vocab_size);
  const double per_block_weights = 12.0 * C * C;
  // Attention scores and values over the causal window, counted PaLM-style (full T).
  const double attention = 2.0 * double(config_.block_size) * C;
  const double forward = 2.0 * (L * (per_block_weights + attention) + V * C);
  return 3.0 * forward;
}

ModelWork GPT::work(int64_t B, int64_t T_) const {
  const double tokens = double(B) * double(T_);
  const double C = double(config_.n_embd), V = double(config_.padded_vocab()), T = double(T_),
               H = double(config_.n_head);
  ModelWork w;
  // Per token. A block's forward: the four weight matmuls (12·C² multiply-adds) and causal
  // attention (scores and values over half the window on average); its elementwise traffic:
  // ~20 activations of width C (norms, GELU's 4C in and out, residuals, casts) and the
  // attention probabilities (H·T/2 per token, written and read).
  set_block_work(w, {2.0 * 12 * C * C + 2.0 * T * C, 4.0 * (20 * C + H * T)}, tokens);
  // The root: embeddings (3 rows of C per token: wte, wpe, their sum), final norm, the logits
  // matmul and the loss (logits written, softmax read and written).
  w.root_forward_pre = {0, tokens * 4.0 * 3 * C};
  w.root_forward_post = {tokens * 2.0 * C * V, tokens * 4.0 * (3 * C + 3 * V)};
  w.root_backward_pre = {tokens * 4.0 * C * V, tokens * 4.0 * (4 * C + 4 * V)};
  w.root_backward_post = {0, tokens * 4.0 * 3 * C};
  add_tp_work(w, B, T_);
  return w;
}

std::array<int64_t, 3> GPT::largest_matmul(int64_t tokens) const {
  // The MLP's c_fc, or the logits when the vocabulary is wider than 4C.
  return {tokens, config_.n_embd, std::max(4 * config_.n_embd, config_.padded_vocab())};
}

void GPT::embed_forward(Activations& a, const Batch& batch) {
  const auto& c = config_;
  if (!tensor_parallel()) {
    embedding_forward(a.x[0].data<float>(), batch.inputs.data<int32_t>(), w(p_.wte), w(p_.wpe), a.B,
                      a.T, c.n_embd, c.vocab_size, dtype_);
    return;
  }
  vocab_parallel_embed_forward(a, batch, p_.wte, w(p_.wpe));
}

// Each step is labelled with the kind of tensor it produces: a recomputation before the
// block's backward runs only the steps whose outputs the checkpointing mode did not keep.
void GPT::block_forward(int64_t l, const BlockPass& pass) {
  Activations& a = *acts_;
  const int64_t M = a.B * a.T, C = config_.n_embd, Cl = C / tp_slice_.ranks, R = a.rows;
  const BlockParams& p = p_.h[size_t(l)];
  using enum BlockTensor;
  if (pass.runs(cheap)) {
    layernorm_forward(norm_rows(a, a.ln1[l]), a.ln1_mean[l].data<float>(),
                      a.ln1_rstd[l].data<float>(), a.x[l].data<float>(), w(p.ln_1_weight),
                      w(p.ln_1_bias), R, C, dtype_);
    gather_rows(a, a.ln1[l]);
  }
  if (pass.runs(kept))
    linear_forward(a.qkv[l].raw(), a.ln1[l].raw(), w(p.c_attn_weight), w(p.c_attn_bias), M, C,
                   3 * Cl, dtype_);
  if (pass.runs(cheap))
    attention_probs_forward(a.qkv[l].raw(), a.saved(l), a.scratch(), a.att, dtype_);
  if (pass.runs(kept)) {
    attention_values_forward(a.att_y[l].raw(), a.qkv[l].raw(), a.saved(l), a.att, dtype_);
    projection_residual(a.x_mid[l].data<float>(), a.x[l].data<float>(), a.att_y[l].raw(),
                        p.attn_proj_weight, p.attn_proj_bias, M, Cl);
  }
  if (pass.runs(cheap)) {
    layernorm_forward(norm_rows(a, a.ln2[l]), a.ln2_mean[l].data<float>(),
                      a.ln2_rstd[l].data<float>(), a.x_mid[l].data<float>(), w(p.ln_2_weight),
                      w(p.ln_2_bias), R, C, dtype_);
    gather_rows(a, a.ln2[l]);
  }
  if (pass.runs(kept))
    linear_forward(a.fc[l].raw(), a.ln2[l].raw(), w(p.c_fc_weight), w(p.c_fc_bias), M, C, 4 * Cl,
                   dtype_);
  if (pass.runs(cheap)) gelu_forward(a.fc_gelu[l].raw(), a.fc[l].raw(), size_t(M * 4 * Cl), dtype_);
  if (pass.runs(output))
    projection_residual(a.x[l + 1].data<float>(), a.x_mid[l].data<float>(), a.fc_gelu[l].raw(),
                        p.mlp_proj_weight, p.mlp_proj_bias, M, 4 * Cl);
}

double GPT::head_forward(Activations& a, const Batch& batch) {
  layernorm_forward(norm_rows(a, a.lnf), a.lnf_mean.data<float>(), a.lnf_rstd.data<float>(),
                    a.x[config_.n_layer].data<float>(), w(p_.ln_f_weight), w(p_.ln_f_bias), a.rows,
                    config_.n_embd, dtype_);
  gather_rows(a, a.lnf);
  // The logits' weights are tied with the token embedding; under tensor parallelism each rank
  // computes its vocabulary slice's logits, and the loss reduces over the group.
  if (tensor_parallel()) return vocab_parallel_head_forward(a, batch, a.lnf.raw(), p_.wte);
  return lm_head_forward(a.logits.data<float>(), a.losses.data<float>(), a.lnf.raw(), w(p_.wte),
                         batch.targets.data<int32_t>(), head_shape(a), dtype_,
                         a.row_shift.data<float>());
}

void GPT::head_backward(Activations& a, const Batch& batch, float grad_scale) {
  // The padded columns get a zero gradient: their wte rows never change.
  const float* d_normed = a.d_small.data<float>();
  if (tensor_parallel()) {
    d_normed = vocab_parallel_head_backward(a, batch, grad_scale, a.lnf.raw(), p_.wte,
                                            a.cast_scratch.raw());
  } else {
    lm_head_backward(a.d_small.data<float>(), g(p_.wte), a.logits.data<float>(),
                     a.cast_scratch.raw(), a.lnf.raw(), w(p_.wte), batch.targets.data<int32_t>(),
                     grad_scale, head_shape(a), dtype_, a.row_shift.data<float>());
  }
  a.dx.zero_();
  layernorm_backward(a.dx.data<float>(), g(p_.ln_f_weight), g(p_.ln_f_bias), d_normed,
                     a.x[config_.n_layer].data<float>(), w(p_.ln_f_weight),
                     a.lnf_mean.data<float>(), a.lnf_rstd.data<float>(), a.rows, config_.n_embd,
                     dtype_);
}

void GPT::block_backward(int64_t l) {
  Activations& a = *acts_;
  const int64_t M = a.B * a.T, C = config_.n_embd, Cl = C / tp_slice_.ranks, R = a.rows;
  const BlockParams& p = p_.h[size_t(l)];
  float* dx = a.dx.data<float>();  // dL/dx[l+1] on entry, dL/dx[l] on exit (its R rows)
  float* d_big = a.d_big.data<float>();
  float* d_small = a.d_small.data<float>();
  void* scratch = a.cast_scratch.raw();

  // x[l+1] = x_mid + mlp_proj(gelu(fc(ln_2(x_mid))))
  // d_big, the gradient after GELU, only feeds GELU's backward: in dtype (BF16 rounds it once,
  // as autocast does), half the bytes of FP32 written and read back.
  linear_backward(d_big, g(p.mlp_proj_weight), g(p.mlp_proj_bias), whole_residual_grad(a), scratch,
                  a.fc_gelu[l].raw(), w(p.mlp_proj_weight), M, 4 * Cl, C, dtype_, nullptr,
                  {.d_in = dtype_});
  // Through GELU and c_fc in one: fc is the input to GELU.
  linear_backward(d_small, g(p.c_fc_weight), g(p.c_fc_bias), d_big, scratch, a.ln2[l].raw(),
                  w(p.c_fc_weight), M, C, 4 * Cl, dtype_, a.fc[l].raw(), {.d_out = dtype_});
  const float* d_ln2 = tensor_parallel() ? sum_input_grad(a, a.d_small) : d_small;
  layernorm_backward(dx, g(p.ln_2_weight), g(p.ln_2_bias), d_ln2, a.x_mid[l].data<float>(),
                     w(p.ln_2_weight), a.ln2_mean[l].data<float>(), a.ln2_rstd[l].data<float>(), R,
                     C, dtype_);

  // x_mid = x[l] + attn_proj(attention(c_attn(ln_1(x[l]))))
  linear_backward(d_small, g(p.attn_proj_weight), g(p.attn_proj_bias), whole_residual_grad(a),
                  scratch, a.att_y[l].raw(), w(p.attn_proj_weight), M, Cl, C, dtype_);
  attention_backward(a.d_qkv.data<float>(), d_small, a.qkv[l].raw(), a.saved(l), a.scratch(), a.att,
                     dtype_);
  linear_backward(d_small, g(p.c_attn_weight), g(p.c_attn_bias), a.d_qkv.data<float>(), scratch,
                  a.ln1[l].raw(), w(p.c_attn_weight), M, C, 3 * Cl, dtype_);
  const float* d_ln1 = tensor_parallel() ? sum_input_grad(a, a.d_small) : d_small;
  layernorm_backward(dx, g(p.ln_1_weight), g(p.ln_1_bias), d_ln1, a.x[l].data<float>(),
                     w(p.ln_1_weight), a.ln1_mean[l].data<float>(), a.ln1_rstd[l].data<float>(), R,
                     C, dtype_);
}

void GPT::embed_backward(Activations& a, const Batch& batch) {
  // One rank's vocabulary slice is all of it without tensor parallelism.
  vocab_parallel_embed_backward(a, batch, p_.wte, g(p_.wpe));
}

}  // namespace st
