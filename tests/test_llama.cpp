// The whole Llama: Hugging Face's parameter names and [out, in] layouts, gradients against
// finite differences (FP32; tied and untied head, grouped-query attention), the BF16 path
// against the FP32 path, and activation checkpointing that changes memory, never numbers.
#include <gtest/gtest.h>

#include <cmath>

#include "models/llama/llama.hpp"
#include "tests/support/local_params.hpp"
#include "tests/support/model_checks.hpp"

namespace st {
namespace {

using testing::perturb;
using testing::random_batch;

// L=2, C=16, 4 heads of 4 over 2 kv heads, F=24, T=8, V=256.
LlamaConfig tiny_llama(bool tied = true) {
  LlamaConfig c;
  c.n_layer = 2, c.n_embd = 16, c.n_head = 4, c.n_kv_head = 2, c.ffn_hidden = 24;
  c.block_size = 8, c.tie_embeddings = tied;
  return c;
}

TEST(Llama, ParameterNamesAndShapesFollowHuggingFace) {
  LlamaConfig c = tiny_llama(false);
  c.n_layer = 3;
  Llama llama(c, DType::f32);
  const auto& s = llama.param_specs();
  ASSERT_EQ(s.size(), 3u + 9u * 3u);
  EXPECT_EQ(s[0].name, "model.embed_tokens.weight");
  EXPECT_EQ(s[0].shape, (Shape{256, 16}));
  EXPECT_EQ(s[1].name, "model.layers.0.input_layernorm.weight");
  EXPECT_EQ(s[2].name, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(s[2].shape, (Shape{16, 16}));  // nn.Linear layout [out, in]
  EXPECT_EQ(s[3].name, "model.layers.0.self_attn.k_proj.weight");
  EXPECT_EQ(s[3].shape, (Shape{8, 16}));  // 2 kv heads of 4
  EXPECT_EQ(s[5].name, "model.layers.0.self_attn.o_proj.weight");
  EXPECT_EQ(s[6].name, "model.layers.0.post_attention_layernorm.weight");
  EXPECT_EQ(s[7].name, "model.layers.0.mlp.gate_proj.weight");
  EXPECT_EQ(s[7].shape, (Shape{24, 16}));
  EXPECT_EQ(s[9].name, "model.layers.0.mlp.down_proj.weight");
  EXPECT_EQ(s[9].shape, (Shape{16, 24}));
  EXPECT_EQ(s[9].init_std, 0.02f / std::sqrt(6.0f));
  EXPECT_EQ(s[s.size() - 2].name, "model.norm.weight");
  EXPECT_EQ(s.back().name, "lm_head.weight");
  EXPECT_EQ(s.back().unit, 0);
  EXPECT_EQ(s[1].unit, 1);
  EXPECT_EQ(llama.num_units(), 4);
  int decayed = 0;
  for (const auto& p : s) decayed += p.weight_decay;
  EXPECT_EQ(decayed, 7 * 3 + 1);  // the seven projections of each block and lm_head
  // Tied: no lm_head.
  Llama tied(tiny_llama(true), DType::f32);
  EXPECT_EQ(tied.param_specs().back().name, "model.norm.weight");
}

TEST(Llama, GradientsMatchFiniteDifferencesInFP32) {
  for (const bool tied : {true, false}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    Llama llama(tiny_llama(tied), DType::f32);
    LocalParams params(llama, 11);
    perturb(params, llama.param_specs().size(), 0.1f);
    testing::expect_model_gradients(llama, params, random_batch(2, 8, 3));
  }
}

// Multi-head attention (n_kv_head = n_head) and one kv head for all (multi-query).
TEST(Llama, GradientsMatchFiniteDifferencesForEveryHeadGrouping) {
  for (const int64_t kv : {int64_t(4), int64_t(1)}) {
    SCOPED_TRACE(kv);
    LlamaConfig c = tiny_llama();
    c.n_kv_head = kv;
    Llama llama(c, DType::f32);
    LocalParams params(llama, 12);
    perturb(params, llama.param_specs().size(), 0.1f);
    testing::expect_model_gradients(llama, params, random_batch(2, 8, 4));
  }
}

// Heads wider or narrower than n_embd / n_head (model.head_dim, as Qwen3's 128 at 1024 / 16):
// q, k, v are n_head·head_dim wide and o maps them back to n_embd.
TEST(Llama, GradientsMatchFiniteDifferencesWithHeadsOfTheirOwnWidth) {
  for (const int64_t head_dim : {int64_t(6), int64_t(2)}) {
    SCOPED_TRACE(head_dim);
    LlamaConfig c = tiny_llama(false);
    c.head_dim = head_dim;
    Llama llama(c, DType::f32);
    EXPECT_EQ(llama.param_specs()[2].shape, (Shape{4 * head_dim, 16}));  // q_proj
    EXPECT_EQ(llama.param_specs()[3].shape, (Shape{2 * head_dim, 16}));  // k_proj
    EXPECT_EQ(llama.param_specs()[5].shape, (Shape{16, 4 * head_dim}));  // o_proj
    LocalParams params(llama, 13);
    perturb(params, llama.param_specs().size(), 0.1f);
    testing::expect_model_gradients(llama, params, random_batch(2, 8, 6));
  }
  LlamaConfig odd = tiny_llama();
  odd.head_dim = 5;
  EXPECT_THROW(Llama(odd, DType::f32), InputError);
}

// Qwen2's q/k/v biases and Qwen3's per-head q/k norm (with heads of their own width, as
// Qwen3's): Hugging Face's names and shapes, and gradients against finite differences.
TEST(Llama, QwenBiasesAndHeadNormsMatchFiniteDifferences) {
  for (const bool qwen3 : {false, true}) {
    SCOPED_TRACE(qwen3 ? "qk_norm, head_dim 6" : "qkv_bias");
    LlamaConfig c = tiny_llama(false);
    c.qkv_bias = !qwen3;
    c.qk_norm = qwen3;
    if (qwen3) c.head_dim = 6;
    const int64_t hs = c.head_size();
    Llama llama(c, DType::f32);
    const auto& s = llama.param_specs();
    if (qwen3) {
      EXPECT_EQ(s[6].name, "model.layers.0.self_attn.q_norm.weight");
      EXPECT_EQ(s[6].shape, (Shape{hs}));
      EXPECT_EQ(s[7].name, "model.layers.0.self_attn.k_norm.weight");
    } else {
      EXPECT_EQ(s[5].name, "model.layers.0.self_attn.q_proj.bias");
      EXPECT_EQ(s[5].shape, (Shape{4 * hs}));
      EXPECT_EQ(s[6].name, "model.layers.0.self_attn.k_proj.bias");
      EXPECT_EQ(s[6].shape, (Shape{2 * hs}));
    }
    LocalParams params(llama, 14);
    perturb(params, s.size(), 0.1f);
    testing::expect_model_gradients(llama, params, random_batch(2, 8, 7));
    // The BF16 policy as for Llama: close to the FP32 path at a width where it means something.
    c.n_embd = 64, c.ffn_hidden = 160, c.block_size = 32;
    if (qwen3) c.head_dim = 32;
    Llama l32(c, DType::f32), l16(c, DType::bf16);
    LocalParams p32(l32, 9), p16(l16, 9);
    perturb(p32, l32.param_specs().size(), 0.05f);
    perturb(p16, l16.param_specs().size(), 0.05f);
    testing::expect_bf16_close_to_fp32(l32, p32, l16, p16, random_batch(4, 32, 8));
  }
}

TEST(Llama, Bf16PathStaysCloseToFp32Path) {
  LlamaConfig c = tiny_llama();
  c.n_embd = 64, c.ffn_hidden = 160, c.block_size = 32;
  Llama l32(c, DType::f32), l16(c, DType::bf16);
  LocalParams p32(l32, 9), p16(l16, 9);
  perturb(p32, l32.param_specs().size(), 0.05f);
  perturb(p16, l16.param_specs().size(), 0.05f);
  testing::expect_bf16_close_to_fp32(l32, p32, l16, p16, random_batch(4, 32, 8));
}

// Every mode's loss and gradients are bitwise those without checkpointing, in FP32 and BF16,
// and each mode keeps less.
TEST(Llama, ActivationCheckpointingChangesMemoryNotNumbers) {
  for (const DType dtype : {DType::f32, DType::bf16}) {
    LlamaConfig c = tiny_llama(false);
    c.n_layer = 3;
    const Batch batch = random_batch(2, 8, 5);
    auto run = [&](ActivationCheckpointing mode, std::vector<float>& grads) {
      Llama llama(c, dtype);
      llama.set_activation_checkpointing(mode);
      LocalParams params(llama, 3);
      perturb(params, llama.param_specs().size(), 0.05f);
      params.zero_grads();
      UnitHooks hooks;
      const double loss = llama.forward_backward(batch, 1.0f / 16, hooks);
      for (size_t i = 0; i < llama.param_specs().size(); ++i) {
        Tensor g = params.grad(i);
        grads.insert(grads.end(), g.data<float>(), g.data<float>() + g.numel());
      }
      return loss;
    };
    using enum ActivationCheckpointing;
    std::vector<float> want;
    const double loss = run(none, want);
    for (const ActivationCheckpointing mode : {selective, full}) {
      SCOPED_TRACE(activation_checkpointing_name(mode));
      std::vector<float> got;
      EXPECT_EQ(run(mode, got), loss);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << i;
    }
    Llama llama(c, dtype);
    EXPECT_LT(llama.activation_bytes_for(2, 8, selective), llama.activation_bytes_for(2, 8, none));
    EXPECT_LT(llama.activation_bytes_for(2, 8, full), llama.activation_bytes_for(2, 8, selective));
  }
}

TEST(Llama, RejectsShapesThatDoNotFit) {
  LlamaConfig c = tiny_llama();
  c.n_kv_head = 3;
  EXPECT_THROW(Llama(c, DType::f32), InputError);
  c = tiny_llama();
  c.n_embd = 12, c.n_head = 4;  // head size 3: no rotary pairs
  EXPECT_THROW(Llama(c, DType::f32), InputError);
  Llama llama(tiny_llama(), DType::f32);
  LocalParams params(llama, 1);
  UnitHooks hooks;
  EXPECT_THROW(llama.forward_loss(random_batch(1, 9, 1), hooks), InputError);
}

}  // namespace
}  // namespace st
