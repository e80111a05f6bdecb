#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "collectives/fake_process_group.hpp"
#include "optim/clip.hpp"
#include "optim/optimizer.hpp"
#include "optim/schedule.hpp"

namespace st {
namespace {

TEST(AdamW, MatchesHandComputedSteps) {
  Tensor w = Tensor::empty("w", {2}, DType::f32), g = Tensor::empty("w.grad", {2}, DType::f32);
  w.data<float>()[0] = 1.0f;
  w.data<float>()[1] = -2.0f;
  OptimizerConfig cfg{OptimizerKind::adamw, 0.9f, 0.99f, 1e-8f, 0.1f};
  AdamW opt({make_optim_param("w", w, g, true)}, cfg);
  double ref_w[2] = {1.0, -2.0}, m[2] = {0, 0}, v[2] = {0, 0};
  const double grads[3][2] = {{0.5, -1.0}, {0.25, 2.0}, {-0.5, 0.1}};
  const double lr = 0.01;
  for (int t = 1; t <= 3; ++t) {
    for (int i = 0; i < 2; ++i) {
      g.data<float>()[i] = float(grads[t - 1][i]);
      m[i] = 0.9 * m[i] + 0.1 * grads[t - 1][i];
      v[i] = 0.99 * v[i] + 0.01 * grads[t - 1][i] * grads[t - 1][i];
      const double mhat = m[i] / (1 - std::pow(0.9, t)), vhat = v[i] / (1 - std::pow(0.99, t));
      ref_w[i] = ref_w[i] * (1 - lr * 0.1) - lr * mhat / (std::sqrt(vhat) + 1e-8);
    }
    opt.step(float(lr));
    for (int i = 0; i < 2; ++i) EXPECT_NEAR(w.data<float>()[i], ref_w[i], 1e-6) << "step " << t;
  }
  EXPECT_EQ(opt.state().size(), 2u);
}

// The clip factor folded into the update (grad_scale) is bitwise the separate scaling pass, and
// leaves the gradients as they were.
TEST(Optimizer, GradScaleIsTheScalingPassFolded) {
  for (const OptimizerKind kind : {OptimizerKind::adamw, OptimizerKind::sgd}) {
    const OptimizerConfig cfg{kind, 0.9f, 0.95f, 1e-8f, 0.1f};
    const int64_t n = 100000;  // above the threshold for threads
    auto make = [&](const char* name) {
      Tensor w = Tensor::empty(name, {n}, DType::f32), g = Tensor::empty("g", {n}, DType::f32);
      for (int64_t i = 0; i < n; ++i) {
        w.data<float>()[i] = std::sin(float(i));
        g.data<float>()[i] = std::cos(float(i) * 0.37f);
      }
      return std::make_pair(w, g);
    };
    auto [w_folded, g_folded] = make("folded");
    auto [w_separate, g_separate] = make("separate");
    auto folded = make_optimizer({make_optim_param("w", w_folded, g_folded, true)}, cfg);
    auto separate = make_optimizer({make_optim_param("w", w_separate, g_separate, true)}, cfg);
    const float factor = 0.3f;
    for (int step = 0; step < 3; ++step) {
      folded->step(0.01f, factor);
      scale_grads(separate->params(), factor);
      separate->step(0.01f);
      for (int64_t i = 0; i < n; ++i)  // the same gradients again next step
        g_separate.data<float>()[i] = std::cos(float(i) * 0.37f);
    }
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(w_folded.data<float>()[i], w_separate.data<float>()[i]) << i;
      ASSERT_EQ(g_folded.data<float>()[i], std::cos(float(i) * 0.37f)) << i;
    }
  }
}

TEST(AdamW, NoDecaySpansAreNotDecayed) {
  Tensor w = Tensor::empty("b", {1}, DType::f32), g = Tensor::zeros("b.grad", {1}, DType::f32);
  w.data<float>()[0] = 3.0f;
  AdamW opt({make_optim_param("b", w, g, false)},
            OptimizerConfig{OptimizerKind::adamw, 0.9f, 0.95f, 1e-8f, 0.5f});
  opt.step(0.1f);
  EXPECT_EQ(w.data<float>()[0], 3.0f);
}

TEST(SGD, MomentumAndDecay) {
  Tensor w = Tensor::empty("w", {1}, DType::f32), g = Tensor::empty("w.grad", {1}, DType::f32);
  w.data<float>()[0] = 1.0f;
  g.data<float>()[0] = 2.0f;
  SGD opt({make_optim_param("w", w, g, true)},
          OptimizerConfig{OptimizerKind::sgd, 0.5f, 0.f, 0.f, 0.1f});
  opt.step(0.1f);  // buf = 2, w = 1 * 0.99 - 0.2
  EXPECT_NEAR(w.data<float>()[0], 0.79, 1e-6);
  opt.step(0.1f);  // buf = 3, w = 0.79 * 0.99 - 0.3
  EXPECT_NEAR(w.data<float>()[0], 0.79 * 0.99 - 0.3, 1e-6);
}

TEST(Optimizer, RejectsNonFp32ParametersByName) {
  Tensor w = Tensor::zeros("transformer.h.3.mlp.c_fc.weight", {4}, DType::bf16);
  Tensor g = Tensor::zeros("grad", {4}, DType::f32);
  try {
    make_optim_param("transformer.h.3.mlp.c_fc.weight", w, g, true);
    FAIL() << "a BF16 master must be rejected";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("transformer.h.3.mlp.c_fc.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("bf16"), std::string::npos) << msg;
  }
  Tensor w32 = Tensor::zeros("w", {4}, DType::f32);
  Tensor g16 = Tensor::zeros("g", {4}, DType::bf16);
  EXPECT_THROW(make_optim_param("w", w32, g16, true), Error);
  EXPECT_THROW(make_optim_param("w", w32, Tensor::zeros("g", {3}, DType::f32), true), Error);
  EXPECT_THROW(make_optim_param("w", Tensor::empty("m", {4}, DType::f32, Device::meta), w32, true),
               Error);
}

TEST(Clipping, GlobalNormAndFactor) {
  Tensor a = Tensor::empty("a", {2}, DType::f32), b = Tensor::empty("b", {1}, DType::f32);
  a.data<float>()[0] = 3;
  a.data<float>()[1] = 0;
  b.data<float>()[0] = 4;
  Tensor ma = Tensor::zeros("ma", {2}, DType::f32), mb = Tensor::zeros("mb", {1}, DType::f32);
  std::vector<OptimParam> ps{make_optim_param("a", ma, a, true),
                             make_optim_param("b", mb, b, true)};
  const double norm = std::sqrt(grad_sum_of_squares(ps));
  EXPECT_DOUBLE_EQ(norm, 5.0);
  EXPECT_EQ(clip_factor(norm, 10.0), 1.0f);
  EXPECT_EQ(clip_factor(norm, 0.0), 1.0f);
  const float f = clip_factor(norm, 1.0);
  scale_grads(ps, f);
  EXPECT_NEAR(std::sqrt(grad_sum_of_squares(ps)), 1.0, 1e-5);
}

// Two ranks hold [3, 0] and [4] of one gradient: the global norm is 5, each part counted once;
// the loss riding along comes back summed, and every rank clips by the same factor.
TEST(Clipping, ShardedNormOverAGroupWithRiders) {
  auto groups = FakeProcessGroup::create(2);
  std::vector<double> norms(2), riders(2);
  std::vector<std::vector<float>> clipped(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      Tensor g = Tensor::empty("g", {r == 0 ? 2 : 1}, DType::f32);
      if (r == 0) {
        g.data<float>()[0] = 3;
        g.data<float>()[1] = 0;
      } else {
        g.data<float>()[0] = 4;
      }
      Tensor m = Tensor::zeros("m", {g.numel()}, DType::f32);
      std::vector<OptimParam> ps{make_optim_param("w", m, g, true)};
      double rider[] = {double(r + 1)};
      norms[size_t(r)] = clip_grad_norm(ps, 1.0, *groups[size_t(r)], rider, "test");
      riders[size_t(r)] = rider[0];
      clipped[size_t(r)].assign(g.data<float>(), g.data<float>() + g.numel());
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_DOUBLE_EQ(norms[size_t(r)], 5.0);
    EXPECT_DOUBLE_EQ(riders[size_t(r)], 3.0);
  }
  EXPECT_NEAR(clipped[0][0], 0.6f, 1e-6);
  EXPECT_NEAR(clipped[1][0], 0.8f, 1e-6);
}

TEST(Clipping, NonFiniteNormIsAnErrorNamingTheContext) {
  auto group = FakeProcessGroup::create(1);
  Tensor g = Tensor::empty("g", {1}, DType::f32);
  g.data<float>()[0] = std::nanf("");
  std::vector<OptimParam> ps{make_optim_param("w", Tensor::zeros("m", {1}, DType::f32), g, true)};
  try {
    clip_grad_norm(ps, 1.0, *group.front(), {}, "step 7");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("step 7: the global gradient norm is not finite"),
              std::string::npos);
  }
}

TEST(Schedule, WarmupThenCosine) {
  LrSchedule s{1.0f, 0.1f, 10, 110};
  EXPECT_FLOAT_EQ(s.at(0), 0.1f);
  EXPECT_FLOAT_EQ(s.at(9), 1.0f);
  EXPECT_FLOAT_EQ(s.at(10), 1.0f);
  EXPECT_NEAR(s.at(60), 0.55f, 1e-6);
  EXPECT_FLOAT_EQ(s.at(110), 0.1f);
  EXPECT_FLOAT_EQ(s.at(500), 0.1f);
}

// The other schedules against values worked out by hand (lr 1, min_lr 0.1).
TEST(Schedule, WarmupThenLinear) {
  LrSchedule s{1.0f, 0.1f, 10, 110, ScheduleKind::linear};
  EXPECT_FLOAT_EQ(s.at(0), 0.1f);
  EXPECT_FLOAT_EQ(s.at(10), 1.0f);
  EXPECT_NEAR(s.at(35), 0.775f, 1e-6);  // a quarter of the way: 0.1 + 0.9 x 0.75
  EXPECT_NEAR(s.at(60), 0.55f, 1e-6);
  EXPECT_FLOAT_EQ(s.at(110), 0.1f);
  EXPECT_FLOAT_EQ(s.at(500), 0.1f);
}

TEST(Schedule, WarmupThenConstant) {
  LrSchedule s{1.0f, 0.1f, 10, 110, ScheduleKind::constant};
  EXPECT_FLOAT_EQ(s.at(0), 0.1f);
  EXPECT_FLOAT_EQ(s.at(10), 1.0f);
  EXPECT_FLOAT_EQ(s.at(109), 1.0f);
  EXPECT_FLOAT_EQ(s.at(500), 1.0f);
}

// Warmup-stable-decay over 50 steps, 10 of warm-up, the last 0.4 (20 steps, 30-49) decaying;
// p = (step - 29) / 20: 0.05 at step 30, 0.25 at 34, 0.5 at 39, 0.75 at 44, 1 at 49 (the last).
LrSchedule wsd(DecayShape shape) {
  return {1.0f, 0.1f, 10, 50, ScheduleKind::wsd, 0.4, shape};
}

TEST(Schedule, WsdLinear) {
  const LrSchedule s = wsd(DecayShape::linear);
  EXPECT_FLOAT_EQ(s.at(0), 0.1f);
  EXPECT_FLOAT_EQ(s.at(20), 1.0f);
  EXPECT_FLOAT_EQ(s.at(29), 1.0f);
  EXPECT_NEAR(s.at(30), 0.955f, 1e-6);  // 0.1 + 0.9 x 0.95
  EXPECT_NEAR(s.at(34), 0.775f, 1e-6);
  EXPECT_NEAR(s.at(44), 0.325f, 1e-6);  // 0.1 + 0.9 x 0.25
  EXPECT_FLOAT_EQ(s.at(49), 0.1f);      // the last step trained is at min_lr
}

TEST(Schedule, WsdCosine) {
  const LrSchedule s = wsd(DecayShape::cosine);
  EXPECT_FLOAT_EQ(s.at(29), 1.0f);
  EXPECT_NEAR(s.at(34), 0.868198f, 1e-6);  // 0.1 + 0.9 x (1 + cos(pi/4)) / 2
  EXPECT_NEAR(s.at(39), 0.55f, 1e-6);
  EXPECT_NEAR(s.at(44), 0.231802f, 1e-6);  // 0.1 + 0.9 x (1 - cos(pi/4)) / 2
  EXPECT_FLOAT_EQ(s.at(49), 0.1f);
}

TEST(Schedule, WsdSqrt) {
  const LrSchedule s = wsd(DecayShape::sqrt);
  EXPECT_FLOAT_EQ(s.at(29), 1.0f);
  EXPECT_NEAR(s.at(34), 0.55f, 1e-6);      // 0.1 + 0.9 x (1 - sqrt(0.25))
  EXPECT_NEAR(s.at(44), 0.220577f, 1e-6);  // 0.1 + 0.9 x (1 - sqrt(0.75))
  EXPECT_FLOAT_EQ(s.at(49), 0.1f);
}

// The decay never starts inside the warm-up, and lasts at least one step (which is at min_lr);
// decaying over all of the steps is the cosine schedule one step ahead, bitwise.
TEST(Schedule, WsdDecayBounds) {
  const LrSchedule late{1.0f, 0.1f, 40, 50, ScheduleKind::wsd, 0.5, DecayShape::linear};
  EXPECT_EQ(late.decay_start(), 40);
  EXPECT_FLOAT_EQ(late.at(39), 1.0f);
  EXPECT_NEAR(late.at(44), 0.55f, 1e-6);  // p = 5 / 10
  const LrSchedule brief{1.0f, 0.1f, 0, 4, ScheduleKind::wsd, 0.1, DecayShape::linear};
  EXPECT_EQ(brief.decay_start(), 3);  // 0.1 x 4 steps rounds to none: one step
  EXPECT_FLOAT_EQ(brief.at(2), 1.0f);
  EXPECT_FLOAT_EQ(brief.at(3), 0.1f);
  const LrSchedule cosine{1.0f, 0.1f, 10, 110};
  const LrSchedule whole{1.0f, 0.1f, 10, 110, ScheduleKind::wsd, 1.0, DecayShape::cosine};
  for (int64_t step = 0; step < 10; ++step) EXPECT_EQ(whole.at(step), cosine.at(step)) << step;
  for (int64_t step = 10; step <= 120; ++step)
    EXPECT_EQ(whole.at(step), cosine.at(step + 1)) << step;
}

}  // namespace
}  // namespace st
