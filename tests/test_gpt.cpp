// The whole GPT: parameter layout, gradients against finite differences (FP32), and the BF16
// path against the FP32 path.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.hpp"
#include "core/ops/layernorm.hpp"
#include "launch/model_factory.hpp"
#include "models/family.hpp"
#include "models/gpt2/gpt.hpp"
#include "tests/grad_check.hpp"
#include "tests/support/local_params.hpp"
#include "tests/support/mlp.hpp"
#include "tests/support/model_checks.hpp"

namespace st {
namespace {

GPTConfig tiny_config() {
  return {2, 16, 2, 8, 256};
}

using testing::perturb;
using testing::random_batch;

TEST(GPT, ParameterNamesAndShapesFollowHuggingFace) {
  GPT gpt(GPTConfig{3, 32, 4, 16, 256}, DType::f32);
  const auto& s = gpt.param_specs();
  ASSERT_EQ(s.size(), 4u + 12u * 3u);
  EXPECT_EQ(s[0].name, "transformer.wte.weight");
  EXPECT_EQ(s[0].shape, (Shape{256, 32}));
  EXPECT_EQ(s[1].name, "transformer.wpe.weight");
  EXPECT_EQ(s[1].shape, (Shape{16, 32}));
  EXPECT_EQ(s[4].name, "transformer.h.0.attn.c_attn.weight");
  EXPECT_EQ(s[4].shape, (Shape{32, 96}));  // Conv1D layout [in, out]
  EXPECT_EQ(s[12].name, "transformer.h.0.mlp.c_proj.weight");
  EXPECT_EQ(s[12].shape, (Shape{128, 32}));
  EXPECT_EQ(s[12].init_std, 0.02f / std::sqrt(6.0f));
  EXPECT_EQ(s.back().name, "transformer.ln_f.bias");
  EXPECT_EQ(s[0].unit, 0);
  EXPECT_EQ(s[2].unit, 1);
  EXPECT_EQ(s.back().unit, 0);
  EXPECT_EQ(gpt.num_units(), 4);
  int decayed = 0;
  for (const auto& p : s) decayed += p.weight_decay;
  EXPECT_EQ(decayed, 4 * 3);  // only the four matmul weights of each block
}

TEST(GPT, InitialWeightsFollowTheInitRules) {
  GPTConfig cfg{2, 64, 2, 32, 256};
  GPT gpt(cfg, DType::f32);
  LocalParams params(gpt, 5);
  auto stddev = [&](size_t i) {
    Tensor t = params.master(i);
    double s = 0;
    for (int64_t j = 0; j < t.numel(); ++j) s += double(t.data<float>()[j]) * t.data<float>()[j];
    return std::sqrt(s / double(t.numel()));
  };
  EXPECT_NEAR(stddev(0), 0.02, 0.001);                   // wte
  EXPECT_NEAR(stddev(4), 0.02, 0.001);                   // c_attn
  EXPECT_NEAR(stddev(6), 0.02 / std::sqrt(4.0), 0.001);  // attn.c_proj
  EXPECT_EQ(params.master(2).data<float>()[7], 1.0f);    // ln_1.weight
  EXPECT_EQ(params.master(3).data<float>()[7], 0.0f);    // ln_1.bias
}

TEST(GPT, GradientsMatchFiniteDifferencesInFP32) {
  GPT gpt(tiny_config(), DType::f32);
  LocalParams params(gpt, 11);
  perturb(params, gpt.param_specs().size(), 0.1f);
  // wte only has gradients in the rows used.
  testing::expect_model_gradients(gpt, params, random_batch(2, 8, 3));
}

TEST(GPT, Bf16PathStaysCloseToFp32Path) {
  GPTConfig cfg{2, 64, 4, 32, 256};
  GPT g32(cfg, DType::f32), g16(cfg, DType::bf16);
  LocalParams p32(g32, 9), p16(g16, 9);
  perturb(p32, g32.param_specs().size(), 0.05f);
  perturb(p16, g16.param_specs().size(), 0.05f);
  testing::expect_bf16_close_to_fp32(g32, p32, g16, p16, random_batch(4, 32, 8));
}

TEST(GPT, SequenceLongerThanContextIsRejected) {
  GPT gpt(tiny_config(), DType::f32);
  LocalParams params(gpt, 1);
  UnitHooks hooks;
  EXPECT_THROW(gpt.forward_loss(random_batch(1, 9, 1), hooks), InputError);
}

// What each checkpointing mode keeps, counted on the meta device for GPT-2 small's shape:
// selective drops the cheap per-layer tensors, full everything but each block's input.
TEST(GPT, ActivationCheckpointingKeepsLess) {
  GPTConfig c;
  c.n_layer = 12, c.n_embd = 768, c.n_head = 12, c.block_size = 1024;
  GPT gpt(c, DType::bf16);
  using enum ActivationCheckpointing;
  const int64_t none_bytes = gpt.activation_bytes_for(4, 1024, none);
  const int64_t selective_bytes = gpt.activation_bytes_for(4, 1024, selective);
  const int64_t full_bytes = gpt.activation_bytes_for(4, 1024, full);
  EXPECT_LT(selective_bytes, none_bytes);
  EXPECT_LT(full_bytes, selective_bytes);
  EXPECT_LT(3 * full_bytes, none_bytes);  // full keeps under a third at this shape
  EXPECT_EQ(gpt.activation_bytes(4, 1024), none_bytes);
  gpt.set_activation_checkpointing(full);
  EXPECT_EQ(gpt.activation_bytes(4, 1024), full_bytes);
}

// A model that declares no blocks cannot checkpoint: an InputError naming the mode and model.
TEST(MLP, ActivationCheckpointingNeedsBlocks) {
  MLP mlp(MLPConfig{}, DType::f32);
  mlp.set_activation_checkpointing(ActivationCheckpointing::none);
  try {
    mlp.set_activation_checkpointing(ActivationCheckpointing::full);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("activation checkpointing 'full'"), std::string::npos)
        << e.what();
  }
}

TEST(MLP, GradientsMatchFiniteDifferences) {
  MLP mlp(MLPConfig{}, DType::f32);
  LocalParams params(mlp, 3);
  perturb(params, mlp.param_specs().size(), 0.1f);
  Batch batch{Tensor::empty("in", {2, 5}, DType::i32), Tensor::empty("tg", {2, 5}, DType::i32)};
  for (int i = 0; i < 10; ++i) {
    batch.inputs.data<int32_t>()[i] = (i * 7) % 16;
    batch.targets.data<int32_t>()[i] = (i * 3 + 1) % 16;
  }
  UnitHooks hooks;
  params.zero_grads();
  mlp.forward_backward(batch, 0.1f, hooks);
  for (size_t i = 0; i < mlp.param_specs().size(); ++i) {
    Tensor m = params.master(i);
    std::vector<float> x(m.data<float>(), m.data<float>() + m.numel());
    std::vector<float> g(params.grad(i).data<float>(), params.grad(i).data<float>() + m.numel());
    auto loss = [&] {
      std::copy(x.begin(), x.end(), m.data<float>());
      return mlp.forward_loss(batch, hooks) * 0.1;
    };
    testing::expect_gradient(mlp.param_specs()[i].name, x, g, loss);
    std::copy(x.begin(), x.end(), m.data<float>());
  }
}

}  // namespace
}  // namespace st

namespace st {
namespace {

// V = 300 padded to 384 (the default rounding) against V = 300 unpadded, FP32, three SGD
// steps: the losses and the real rows of wte's gradient are bitwise equal, and the padding
// rows stay exactly zero with a zero gradient.
TEST(GPT, PaddedVocabularyChangesNothing) {
  GPTConfig plain{2, 16, 2, 8, 300};
  plain.padded_vocab_size = 300;
  GPTConfig padded{2, 16, 2, 8, 300};
  ASSERT_EQ(padded.padded_vocab(), 384);
  GPT a(plain, DType::f32), b(padded, DType::f32);
  EXPECT_EQ(b.param_specs()[0].shape, (Shape{384, 16}));
  EXPECT_EQ(b.param_specs()[0].real_shape(), (Shape{300, 16}));
  LocalParams pa(a, 9), pb(b, 9);
  Batch batch{Tensor::empty("in", {2, 8}, DType::i32), Tensor::empty("tg", {2, 8}, DType::i32)};
  for (int64_t i = 0; i < 16; ++i) {
    batch.inputs.data<int32_t>()[i] = int32_t(uniform_int_at(4, 1, uint64_t(i), 300));
    batch.targets.data<int32_t>()[i] = int32_t(uniform_int_at(4, 2, uint64_t(i), 300));
  }
  const int64_t real = 300 * 16, all = 384 * 16;
  UnitHooks hooks;
  for (int step = 0; step < 3; ++step) {
    pa.zero_grads();
    pb.zero_grads();
    const double la = a.forward_backward(batch, 1.0f / 16, hooks);
    const double lb = b.forward_backward(batch, 1.0f / 16, hooks);
    EXPECT_EQ(lb, la) << "step " << step;
    const float* ga = pa.grad(0).data<float>();
    const float* gb = pb.grad(0).data<float>();
    for (int64_t j = 0; j < real; ++j) ASSERT_EQ(gb[j], ga[j]) << j;
    for (int64_t j = real; j < all; ++j) ASSERT_EQ(gb[j], 0.f) << j;
    for (size_t i = 0; i < a.param_specs().size(); ++i) {
      for (LocalParams* p : {&pa, &pb}) {
        Tensor m = p->master(i), g = p->grad(i);
        for (int64_t j = 0; j < m.numel(); ++j) m.data<float>()[j] -= 0.5f * g.data<float>()[j];
      }
    }
    pa.cast_for_compute();
    pb.cast_for_compute();
    for (int64_t j = real; j < all; ++j) ASSERT_EQ(pb.master(0).data<float>()[j], 0.f);
  }
}

// The LayerNorms compute with kLayerNormEps: a config.json asking for another epsilon describes
// another model, refused by name (it was ignored: 0.5 and 1e-5 gave the same loss); the
// epsilon an export writes reads back.
TEST(GPT, AConfigJsonWithAnotherLayerNormEpsilonIsRefused) {
  ModelConfig shape;
  shape.n_layer = 2, shape.n_embd = 16, shape.n_head = 2, shape.block_size = 8;
  nlohmann::json j =
      nlohmann::json::parse(model_family("gpt2").hf_config(shape, DType::f32).dump());
  EXPECT_EQ(j["layer_norm_epsilon"].get<double>(), 1e-5);
  EXPECT_EQ(model_config_from_hf(j, "config.json").n_embd, 16);
  j["layer_norm_epsilon"] = 0.5;
  try {
    model_config_from_hf(j, "'hf/config.json'");
    FAIL() << "layer_norm_epsilon = 0.5 was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'hf/config.json': layer_norm_epsilon = 0.5 is not "
                                         "supported (this GPT-2's LayerNorm uses 1e-05)"),
              std::string::npos)
        << e.what();
  }
  j["layer_norm_epsilon"] = double(kLayerNormEps);  // the float's own value, as written by some
  EXPECT_NO_THROW(model_config_from_hf(j, "config.json"));
  j["layer_norm_epsilon"] = "1e-5";
  EXPECT_THROW(model_config_from_hf(j, "config.json"), InputError);
}

}  // namespace
}  // namespace st
