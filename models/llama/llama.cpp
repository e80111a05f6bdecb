#include "models/llama/llama.hpp"

#include <algorithm>
#include <cmath>

#include "core/model/activation_arena.hpp"
#include "core/model/decoder_activations.hpp"
#include "core/model/decoder_model_impl.hpp"
#include "core/ops/elementwise.hpp"
#include "core/ops/embedding.hpp"
#include "core/ops/head_norm.hpp"
#include "core/ops/linear.hpp"
#include "core/ops/lm_head.hpp"
#include "core/ops/rmsnorm.hpp"
#include "core/ops/swiglu.hpp"
#include "models/llama/parallelize.hpp"

namespace st {

namespace {
// The KV heads one of `tp` ranks keeps: its share, or the one its query heads use when there are
// fewer KV heads than ranks (models/llama/parallelize.cpp).
int64_t local_kv_heads(int64_t n_kv_head, int64_t tp) {
  return std::max<int64_t>(n_kv_head / tp, 1);
}
}  // namespace

// Everything one micro-batch of shape [B, T] keeps from forward to backward, plus scratch, in
// one ActivationArena; per-layer vectors of recomputed kinds share one tensor
// (BlockModel::per_block). W = (H + 2·KV)·hs: q, k and v side by side, q and k rotated.
struct LlamaActivations : DecoderActivations {
  RopeTable rope;
  std::vector<Tensor> ln1, ln2;      // L, dtype [B,T,C]
  std::vector<Tensor> rstd1, rstd2;  // L, FP32 [B*T]
  std::vector<Tensor> qkv;           // L, dtype [B,T,W] (after the rotation)
  // With qk_norm: each q and k head before its norm, and its rstd.
  std::vector<Tensor> q_in, k_in;      // L, FP32 [B·T·H, hs], [B·T·KV, hs]
  std::vector<Tensor> q_rstd, k_rstd;  // L, FP32 [B·T·H], [B·T·KV]
  std::vector<Tensor> gate_up;         // L, dtype [B,T,2F]
  std::vector<Tensor> swiglu;          // L, dtype [B,T,F]
  Tensor lnf, lnf_rstd;                // dtype [B,T,C]; FP32 [B*T]
  // Scratch shared by all layers.
  Tensor d_qkv;           // FP32 [B,T,W]
  Tensor d_gate_up;       // dtype [B,T,2F]
  Tensor d_swiglu;        // FP32 [B,T,F]
  Tensor cast_scratch;    // dtype [B*T, max(W, Vp, C)]: gradients the matmuls read
  ActivationArena arena;  // last: its declaration passes fill the tensors above

  // Under tensor parallelism (tp > 1) the heads, the MLP's width and the vocabulary are one
  // rank's slice (H, KV, F, Vp below are its).
  LlamaActivations(const LlamaConfig& cfg, DType dt, int64_t B_, int64_t T_,
                   ActivationCheckpointing mode_, const TpSlice& slice, const StageBlocks& blocks_,
                   Device device, const ActivationArena::SharedAllocator& shared = {})
      : DecoderActivations(B_, T_, mode_, blocks_),
        rope(device == Device::meta ? RopeTable{}
                                    : rope_table(T_, cfg.head_size(), cfg.rope_theta)),
        arena(
            "Llama activations", device, [&](ActivationArena& a) { declare(cfg, dt, slice, a); },
            shared) {}

  void declare(const LlamaConfig& cfg, DType dt, const TpSlice& slice, ActivationArena& arena) {
    const int64_t tp = slice.ranks, C = cfg.n_embd, L = cfg.n_layer, H = cfg.n_head / tp,
                  F = cfg.ffn_hidden / tp;
    const int64_t Vp = cfg.padded_vocab() / tp;
    att = {B, T, H, cfg.head_size(), AttentionShape{}.block, local_kv_heads(cfg.n_kv_head, tp)};
    declare_common(arena, dt, L, C, Vp, "self_attn", slice);
    const int64_t W = att.qkv_width();
    auto f32 = [&](const char* name, Shape s) { return arena.f32(name, std::move(s)); };
    auto act = [&](const char* name, Shape s) { return arena.make(name, std::move(s), dt); };
    // The norms' outputs, gathered in place from every rank's rows under sequence parallelism.
    auto gathered = [&](const char* name) {
      return tp_operand(arena, slice.sequence_parallel && tp > 1, name, {B, T, C}, dt);
    };
    using enum BlockTensor;
    ln1 = layers(cheap, L, [&] { return gathered("input_layernorm.out"); });
    ln2 = layers(cheap, L, [&] { return gathered("post_attention_layernorm.out"); });
    // The norms' statistics are of the residual stream's rows (this rank's under sequence
    // parallelism); their outputs of all B·T rows, the column-parallel matmuls' inputs.
    rstd1 = layers(cheap, L, [&] { return f32("input_layernorm.rstd", {rows}); });
    rstd2 = layers(cheap, L, [&] { return f32("post_attention_layernorm.rstd", {rows}); });
    qkv = layers(kept, L, [&] { return act("self_attn.qkv", {B, T, W}); });
    if (cfg.qk_norm) {
      const int64_t hs = cfg.head_size(), KV = att.KV();
      q_in = layers(kept, L, [&] { return f32("self_attn.q_norm.in", {B * T * H, hs}); });
      k_in = layers(kept, L, [&] { return f32("self_attn.k_norm.in", {B * T * KV, hs}); });
      q_rstd = layers(kept, L, [&] { return f32("self_attn.q_norm.rstd", {B * T * H}); });
      k_rstd = layers(kept, L, [&] { return f32("self_attn.k_norm.rstd", {B * T * KV}); });
    }
    gate_up = layers(kept, L, [&] { return act("mlp.gate_up", {B, T, 2 * F}); });
    swiglu = layers(cheap, L, [&] { return act("mlp.swiglu", {B, T, F}); });
    lnf = gathered("norm.out");
    lnf_rstd = f32("norm.rstd", {rows});
    d_qkv = f32("d_qkv", {B, T, W});
    d_gate_up = act("d_gate_up", {B, T, 2 * F});
    d_swiglu = f32("d_swiglu", {B, T, F});
    // SwiGLU's backward writes its own dtype output (d_gate_up): 2F is not needed here.
    cast_scratch = act("grad_cast", {B * T, std::max({W, Vp, C})});
  }
};

template class DecoderModel<LlamaConfig, LlamaActivations>;

Llama::Llama(const LlamaConfig& cfg, DType compute_dtype, TpSlice slice)
    : DecoderModel(cfg, compute_dtype, "Llama", slice) {
  const int64_t C = cfg.n_embd, L = cfg.n_layer, V = cfg.vocab_size, Vp = cfg.padded_vocab();
  if (cfg.head_dim <= 0 && C % cfg.n_head != 0)
    fail_input("Llama: n_embd {} is not divisible by n_head {}", C, cfg.n_head);
  if (cfg.head_size() < 2 || cfg.head_size() % 2 != 0)
    fail_input("Llama: the head size {} must be even (rotary pairs)", cfg.head_size());
  if (cfg.n_kv_head < 1 || cfg.n_head % cfg.n_kv_head != 0)
    fail_input("Llama: n_kv_head {} does not divide n_head {}", cfg.n_kv_head, cfg.n_head);
  if (Vp < V) fail_input("Llama: padded_vocab_size {} is smaller than vocab_size {}", Vp, V);
  const int64_t hs = cfg.head_size(), Q = cfg.n_head * hs, KV = cfg.n_kv_head * hs;
  const int64_t F = cfg.ffn_hidden;
  const float std = 0.02f;
  // The projections into the residual stream start smaller, as GPT-2's do.
  const float out_std = 0.02f / std::sqrt(2.0f * float(L));
  auto linear = [&](const std::string& name, int64_t out, int64_t in, float init_std) {
    return add_param(name, {out, in}, InitKind::normal, init_std, true);
  };
  auto norm = [&](const std::string& name, int64_t width) {
    return add_param(name, {width}, InitKind::ones, 0, false);
  };
  auto bias = [&](const std::string& name, int64_t width) {
    return add_param(name, {width}, InitKind::zeros, 0, false);
  };
  p_.embed = add_param("model.embed_tokens.weight", {Vp, C}, InitKind::normal, std, false);
  specs_[p_.embed].real_rows = V;  // the padding rows stay zero and are never exported
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    BlockParams b{};
    b.input_norm = norm(p + "input_layernorm.weight", C);
    // q, k, v and gate, up are declared next to each other: each group is one fused projection.
    b.q = linear(p + "self_attn.q_proj.weight", Q, C, std);
    b.k = linear(p + "self_attn.k_proj.weight", KV, C, std);
    b.v = linear(p + "self_attn.v_proj.weight", KV, C, std);
    if (cfg.qkv_bias) {
      b.q_bias = bias(p + "self_attn.q_proj.bias", Q);
      b.k_bias = bias(p + "self_attn.k_proj.bias", KV);
      b.v_bias = bias(p + "self_attn.v_proj.bias", KV);
    }
    b.o = linear(p + "self_attn.o_proj.weight", C, Q, out_std);
    if (cfg.qk_norm) {
      b.q_norm = norm(p + "self_attn.q_norm.weight", hs);
      b.k_norm = norm(p + "self_attn.k_norm.weight", hs);
    }
    b.post_norm = norm(p + "post_attention_layernorm.weight", C);
    b.gate = linear(p + "mlp.gate_proj.weight", F, C, std);
    b.up = linear(p + "mlp.up_proj.weight", F, C, std);
    b.down = linear(p + "mlp.down_proj.weight", C, F, out_std);
    p_.layers.push_back(b);
  }
  p_.norm = norm("model.norm.weight", C);
  for (const BlockParams& b : p_.layers) {
    norm_params_.insert(norm_params_.end(), {b.input_norm, b.post_norm});
    if (cfg.qk_norm) head_partial_params_.insert(head_partial_params_.end(), {b.q_norm, b.k_norm});
  }
  norm_params_.push_back(p_.norm);
  p_.head = p_.embed;
  if (!cfg.tie_embeddings) {
    p_.head = linear("lm_head.weight", Vp, C, std);
    specs_[p_.head].real_rows = V;
  }
  parallelize_llama(cfg, specs_);  // FSDP units and placements: models/llama/parallelize.cpp
  if (slice.ranks > 1) {
    // Each rank keeps whole query heads and the KV heads they use (fewer KV heads than ranks:
    // the one its queries use, shared with the ranks whose queries use it too).
    for (const auto& [what, n] : {std::pair{"n_head", cfg.n_head},
                                  {"ffn_hidden", cfg.ffn_hidden},
                                  {"the padded vocabulary", Vp}})
      if (n % slice.ranks != 0)
        fail_input("Llama: {} {} is not divisible by the tensor-parallel degree {}", what, n,
                   slice.ranks);
    if (cfg.n_kv_head % slice.ranks != 0 && slice.ranks % cfg.n_kv_head != 0)
      fail_input("Llama: n_kv_head {} and the tensor-parallel degree {}: neither divides the other",
                 cfg.n_kv_head, slice.ranks);
    slice_param_specs(specs_, slice.rank, slice.ranks);
  }
}

// This rank's widths: all of them without tensor parallelism.
Llama::Widths Llama::widths() const {
  const LlamaConfig& c = config_;
  const int64_t tp = tp_slice_.ranks, hs = c.head_size();
  const int64_t kv = local_kv_heads(c.n_kv_head, tp);
  return {c.n_head / tp, kv, c.n_head / tp * hs, kv * hs, c.ffn_hidden / tp};
}

Llama::~Llama() = default;

std::string Llama::describe() const {
  const LlamaConfig& c = config_;
  return fmt::format(
             "{} L={} C={} H={}{} KV={} F={} T={} V={}{}{}", c.name, c.n_layer, c.n_embd, c.n_head,
             c.head_size() * c.n_head == c.n_embd ? std::string()
                                                  : fmt::format(" D={}", c.head_size()),
             c.n_kv_head, c.ffn_hidden, c.block_size, c.vocab_size,
             c.padded_vocab() == c.vocab_size ? std::string()
                                              : fmt::format(" (padded to {})", c.padded_vocab()),
             c.tie_embeddings ? " tied" : "") +
         (c.qkv_bias ? " qkv-bias" : "") + (c.qk_norm ? " qk-norm" : "");
}

std::vector<std::pair<std::string, int64_t>> Llama::hyperparameters() const {
  const LlamaConfig& c = config_;
  return {{"n_layer", c.n_layer},
          {"n_embd", c.n_embd},
          {"n_head", c.n_head},
          {"n_kv_head", c.n_kv_head},
          {"ffn_hidden", c.ffn_hidden},
          {"block_size", c.block_size},
          {"vocab_size", c.vocab_size},
          {"padded_vocab_size", c.padded_vocab()},
          {"tie_embeddings", c.tie_embeddings ? 1 : 0}};
}

double Llama::flops_per_token() const {
  const LlamaConfig& c = config_;
  const double C = double(c.n_embd), L = double(c.n_layer), V = double(c.vocab_size);
  const double hs = double(c.head_size()), Q = double(c.n_head) * hs, KV = double(c.n_kv_head) * hs;
  const double per_block_weights = C * (Q + 2 * KV) + Q * C + 3 * C * double(c.ffn_hidden);
  // Scores and values over the full context, counted PaLM-style as for GPT.
  const double attention = 2.0 * double(c.block_size) * Q;
  // 2 FLOPs per multiply-add; x3 for forward + backward.
  return 3.0 * 2.0 * (L * (per_block_weights + attention) + V * C);
}

ModelWork Llama::work(int64_t B, int64_t T_) const {
  const LlamaConfig& c = config_;
  const double tokens = double(B) * double(T_);
  const double C = double(c.n_embd), V = double(c.padded_vocab()), T = double(T_);
  const double H = double(c.n_head), hs = double(c.head_size()), F = double(c.ffn_hidden);
  const double Q = H * hs, KV = double(c.n_kv_head) * hs;
  ModelWork w;
  // Per token. A block's forward: q, k, v, o and gate, up, down, and causal attention over half
  // the window on average. Its elementwise traffic: two RMSNorms (C in, C out each), the
  // rotation of q and k (read and written), SwiGLU (2F in, F out), two residual adds (3C
  // each), casts of the packed outputs, and the attention probabilities (H·T/2, written and
  // read).
  const double flops = 2.0 * (C * (Q + 2 * KV) + Q * C + 3 * C * F) + 2.0 * T * Q;
  const double bytes = 4.0 * (4 * C + 2 * (Q + KV) + 3 * F + 6 * C + (Q + 2 * KV) + 2 * F + H * T);
  set_block_work(w, {flops, bytes}, tokens);
  // The root: the embedding (a row of C per token, read and written), the final norm, the
  // logits matmul and the loss.
  w.root_forward_pre = {0, tokens * 4.0 * 2 * C};
  w.root_forward_post = {tokens * 2.0 * C * V, tokens * 4.0 * (3 * C + 3 * V)};
  w.root_backward_pre = {tokens * 4.0 * C * V, tokens * 4.0 * (4 * C + 4 * V)};
  w.root_backward_post = {0, tokens * 4.0 * 2 * C};
  add_tp_work(w, B, T_);
  return w;
}

std::array<int64_t, 3> Llama::largest_matmul(int64_t tokens) const {
  return {tokens, config_.n_embd, std::max(config_.ffn_hidden, config_.padded_vocab())};
}

std::array<LinearPart, 3> Llama::qkv_parts(const BlockParams& p, bool backward) {
  const LlamaConfig& c = config_;
  const Widths n = widths();
  const int64_t Q = n.q, KV = n.kv;
  auto part = [&](size_t weight, size_t bias, int64_t N) {
    return LinearPart{w(weight), backward ? g(weight) : nullptr, N, c.qkv_bias ? w(bias) : nullptr,
                      c.qkv_bias && backward ? g(bias) : nullptr};
  };
  return {part(p.q, p.q_bias, Q), part(p.k, p.k_bias, KV), part(p.v, p.v_bias, KV)};
}

// Steps labelled with the kind of tensor they produce, as in GPT::block_forward.
void Llama::block_forward(int64_t l, const BlockPass& pass) {
  Activations& a = *acts_;
  const LlamaConfig& c = config_;
  const Widths n = widths();
  const int64_t M = a.B * a.T, C = c.n_embd, F = n.ffn, Q = n.q;
  const BlockParams& p = p_.layers[size_t(l)];
  using enum BlockTensor;
  if (pass.runs(cheap)) {
    rmsnorm_forward(norm_rows(a, a.ln1[l]), a.rstd1[l].data<float>(), a.x[l].data<float>(),
                    w(p.input_norm), a.rows, C, float(c.norm_eps), dtype_);
    gather_rows(a, a.ln1[l]);
  }
  if (pass.runs(kept)) {
    fused_linear_forward(a.qkv[l].raw(), a.ln1[l].raw(), qkv_parts(p, false), M, C, dtype_);
    if (c.qk_norm) {
      const int64_t W = a.att.qkv_width(), hs = c.head_size();
      head_rmsnorm_forward(a.qkv[l].raw(), a.q_in[l].data<float>(), a.q_rstd[l].data<float>(),
                           w(p.q_norm), M, W, 0, n.heads, hs, float(c.norm_eps), dtype_);
      head_rmsnorm_forward(a.qkv[l].raw(), a.k_in[l].data<float>(), a.k_rstd[l].data<float>(),
                           w(p.k_norm), M, W, n.heads, n.kv_heads, hs, float(c.norm_eps), dtype_);
    }
    // q's and k's heads lead each row: one rotation covers both.
    rope_forward(a.qkv[l].raw(), a.B, a.T, n.heads + n.kv_heads, a.att.qkv_width(), a.rope, dtype_);
  }
  if (pass.runs(cheap))
    attention_probs_forward(a.qkv[l].raw(), a.saved(l), a.scratch(), a.att, dtype_);
  if (pass.runs(kept)) {
    attention_values_forward(a.att_y[l].raw(), a.qkv[l].raw(), a.saved(l), a.att, dtype_);
    projection_residual(a.x_mid[l].data<float>(), a.x[l].data<float>(), a.att_y[l].raw(), p.o, M,
                        Q);
  }
  if (pass.runs(cheap)) {
    rmsnorm_forward(norm_rows(a, a.ln2[l]), a.rstd2[l].data<float>(), a.x_mid[l].data<float>(),
                    w(p.post_norm), a.rows, C, float(c.norm_eps), dtype_);
    gather_rows(a, a.ln2[l]);
  }
  if (pass.runs(kept)) {
    const LinearPart gate_up[] = {{w(p.gate), nullptr, F}, {w(p.up), nullptr, F}};
    fused_linear_forward(a.gate_up[l].raw(), a.ln2[l].raw(), gate_up, M, C, dtype_);
  }
  if (pass.runs(cheap)) swiglu_forward(a.swiglu[l].raw(), a.gate_up[l].raw(), M, F, dtype_);
  if (pass.runs(output))
    projection_residual(a.x[l + 1].data<float>(), a.x_mid[l].data<float>(), a.swiglu[l].raw(),
                        p.down, M, F);
}

// out_x = x_in + in · weightᵀ for o_proj and down_proj (nn.Linear's [C, K]; row-parallel under
// tensor parallelism).
void Llama::projection_residual(float* out_x, const float* x_in, const void* in, size_t weight,
                                int64_t M, int64_t K) {
  Activations& a = *acts_;
  const int64_t C = config_.n_embd;
  if (tensor_parallel()) {
    row_parallel_residual(out_x, x_in, in, M, K, MatView::row_major(w(weight), dtype_, C, K).t(),
                          nullptr);
    return;
  }
  const LinearPart part[] = {{w(weight), nullptr, C}};
  fused_linear_forward(a.proj_out.raw(), in, part, M, K, dtype_);
  residual_add(out_x, x_in, a.proj_out.raw(), dtype_, size_t(M * C));
}

void Llama::block_backward(int64_t l) {
  Activations& a = *acts_;
  const LlamaConfig& c = config_;
  const Widths n = widths();
  const int64_t M = a.B * a.T, C = c.n_embd, F = n.ffn, Q = n.q, R = a.rows;
  const BlockParams& p = p_.layers[size_t(l)];
  float* dx = a.dx.data<float>();  // dL/dx[l+1] on entry, dL/dx[l] on exit (its R rows)
  float* d_small = a.d_small.data<float>();
  void* scratch = a.cast_scratch.raw();

  // x[l+1] = x_mid + down(swiglu(gate_up(rmsnorm(x_mid))))
  const LinearPart down[] = {{w(p.down), g(p.down), C}};
  // d_swiglu only feeds SwiGLU's backward: in dtype (BF16 rounds it once, as autocast does),
  // half the bytes of FP32 written and read back.
  fused_linear_backward(a.d_swiglu.raw(), whole_residual_grad(a), scratch, a.swiglu[l].raw(), down,
                        M, F, dtype_, dtype_);
  // SwiGLU's backward rounds its own output to the dtype the projections' matmuls read.
  swiglu_backward(a.d_gate_up.raw(), a.d_swiglu.raw(), a.gate_up[l].raw(), M, F, dtype_, dtype_);
  const LinearPart gate_up[] = {{w(p.gate), g(p.gate), F}, {w(p.up), g(p.up), F}};
  fused_linear_backward_from(d_small, a.d_gate_up.raw(), a.ln2[l].raw(), gate_up, M, C, dtype_);
  const float* d_ln2 = tensor_parallel() ? sum_input_grad(a, a.d_small) : d_small;
  rmsnorm_backward(dx, g(p.post_norm), d_ln2, a.x_mid[l].data<float>(), w(p.post_norm),
                   a.rstd2[l].data<float>(), R, C, dtype_);

  // x_mid = x[l] + o(attention(rope(qkv(rmsnorm(x[l])))))
  const LinearPart o[] = {{w(p.o), g(p.o), C}};
  fused_linear_backward(d_small, whole_residual_grad(a), scratch, a.att_y[l].raw(), o, M, Q,
                        dtype_);
  attention_backward(a.d_qkv.data<float>(), d_small, a.qkv[l].raw(), a.saved(l), a.scratch(), a.att,
                     dtype_);
  const int64_t W = a.att.qkv_width();
  if (c.qk_norm) {
    // The inverse rotation in place in FP32, then each q and k head's norm backward.
    float* d_qkv = a.d_qkv.data<float>();
    rope_backward(d_qkv, d_qkv, a.B, a.T, n.heads + n.kv_heads, W, a.rope, DType::f32);
    const int64_t hs = c.head_size();
    // Under tensor parallelism each rank's heads give part of the norms' gradients, summed
    // over the group once a step (tp_partial_grads).
    head_rmsnorm_backward(d_qkv, g(p.q_norm), a.q_in[l].data<float>(), w(p.q_norm),
                          a.q_rstd[l].data<float>(), M, W, 0, n.heads, hs, dtype_);
    head_rmsnorm_backward(d_qkv, g(p.k_norm), a.k_in[l].data<float>(), w(p.k_norm),
                          a.k_rstd[l].data<float>(), M, W, n.heads, n.kv_heads, hs, dtype_);
    fused_linear_backward(d_small, d_qkv, scratch, a.ln1[l].raw(), qkv_parts(p, true), M, C,
                          dtype_);
  } else {
    // The inverse rotation writes the gradient in the dtype the projections' matmuls read.
    rope_backward(scratch, a.d_qkv.data<float>(), a.B, a.T, n.heads + n.kv_heads, W, a.rope,
                  dtype_);
    fused_linear_backward_from(d_small, scratch, a.ln1[l].raw(), qkv_parts(p, true), M, C, dtype_);
  }
  const float* d_ln1 = tensor_parallel() ? sum_input_grad(a, a.d_small) : d_small;
  rmsnorm_backward(dx, g(p.input_norm), d_ln1, a.x[l].data<float>(), w(p.input_norm),
                   a.rstd1[l].data<float>(), R, C, dtype_);
}

double Llama::head_forward(Activations& a, const Batch& batch) {
  const LlamaConfig& c = config_;
  rmsnorm_forward(norm_rows(a, a.lnf), a.lnf_rstd.data<float>(), a.x[c.n_layer].data<float>(),
                  w(p_.norm), a.rows, c.n_embd, float(c.norm_eps), dtype_);
  gather_rows(a, a.lnf);
  if (tensor_parallel()) return vocab_parallel_head_forward(a, batch, a.lnf.raw(), p_.head);
  return lm_head_forward(a.logits.data<float>(), a.losses.data<float>(), a.lnf.raw(), w(p_.head),
                         batch.targets.data<int32_t>(), head_shape(a), dtype_,
                         a.row_shift.data<float>());
}

void Llama::head_backward(Activations& a, const Batch& batch, float grad_scale) {
  const LlamaConfig& c = config_;
  const float* d_normed = a.d_small.data<float>();
  if (tensor_parallel())
    d_normed = vocab_parallel_head_backward(a, batch, grad_scale, a.lnf.raw(), p_.head,
                                            a.cast_scratch.raw());
  else
    lm_head_backward(a.d_small.data<float>(), g(p_.head), a.logits.data<float>(),
                     a.cast_scratch.raw(), a.lnf.raw(), w(p_.head), batch.targets.data<int32_t>(),
                     grad_scale, head_shape(a), dtype_, a.row_shift.data<float>());
  a.dx.zero_();
  rmsnorm_backward(a.dx.data<float>(), g(p_.norm), d_normed, a.x[c.n_layer].data<float>(),
                   w(p_.norm), a.lnf_rstd.data<float>(), a.rows, c.n_embd, dtype_);
}

void Llama::embed_forward(Activations& a, const Batch& batch) {
  if (tensor_parallel()) return vocab_parallel_embed_forward(a, batch, p_.embed, nullptr);
  embedding_forward(a.x[0].data<float>(), batch.inputs.data<int32_t>(), w(p_.embed), nullptr, a.B,
                    a.T, config_.n_embd, config_.vocab_size, dtype_);
}

void Llama::embed_backward(Activations& a, const Batch& batch) {
  if (tensor_parallel()) return vocab_parallel_embed_backward(a, batch, p_.embed, nullptr);
  embedding_backward(g(p_.embed), nullptr, a.dx.data<float>(), batch.inputs.data<int32_t>(), a.B,
                     a.T, config_.n_embd);
}

}  // namespace st
