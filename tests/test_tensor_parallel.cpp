// Tensor parallelism's pieces against one rank's: its collectives over in-process groups, and
// the vocabulary-parallel loss, whose slices' losses and gradients are the whole rows' (bitwise
// at one rank, to FP32 rounding at 2 and 4: only the sums' order differs).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.hpp"

#include "core/model/param_slice.hpp"
#include "core/ops/cross_entropy.hpp"
#include "core/ops/vocab_parallel_loss.hpp"
#include "core/rng.hpp"
#include "models/gpt2/gpt.hpp"
#include "models/llama/llama.hpp"
#include "parallel/tensor_parallel.hpp"
#include "parallel/tp_gradient_sums.hpp"
#include "tests/support/fake_ranks.hpp"
#include "tests/support/local_params.hpp"
#include "tests/support/model_checks.hpp"

namespace st {
namespace {

TEST(TensorParallel, CollectivesOverTheGroup) {
  for (int n : {2, 3, 4}) {
    std::vector<std::vector<float>> gathered(static_cast<size_t>(n)),
        scattered(static_cast<size_t>(n)), sums(static_cast<size_t>(n)),
        maxima(static_cast<size_t>(n));
    on_ranks(n, [&](ProcessGroup& group) {
      GroupTensorParallel tp(group, true);
      const int r = tp.rank();
      EXPECT_EQ(tp.size(), n);
      Tensor mine = Tensor::empty("mine", {2}, DType::f32);
      mine.data<float>()[0] = float(r), mine.data<float>()[1] = float(10 * r);
      Tensor all = Tensor::empty("all", {2 * n}, DType::f32);
      tp.all_gather(mine, all);
      gathered[size_t(r)].assign(all.data<float>(), all.data<float>() + 2 * n);
      // Rank r contributes r + 1 to every element: element k of the scatter input is k + r.
      Tensor in = Tensor::empty("in", {3 * n}, DType::f32),
             out = Tensor::empty("out", {3}, DType::f32);
      for (int k = 0; k < 3 * n; ++k) in.data<float>()[k] = float(k + r);
      tp.reduce_scatter_sum(in, out);
      scattered[size_t(r)].assign(out.data<float>(), out.data<float>() + 3);
      Tensor s = Tensor::empty("s", {1}, DType::f32), m = Tensor::empty("m", {1}, DType::f32);
      s.data<float>()[0] = float(r + 1), m.data<float>()[0] = float(r == 1 ? 7 : -r);
      tp.all_reduce_sum(s);
      tp.all_reduce_max(m);
      sums[size_t(r)] = {s.data<float>()[0]};
      maxima[size_t(r)] = {m.data<float>()[0]};
    });
    for (int r = 0; r < n; ++r) {
      for (int k = 0; k < n; ++k) {
        EXPECT_EQ(gathered[size_t(r)][size_t(2 * k)], float(k));
        EXPECT_EQ(gathered[size_t(r)][size_t(2 * k + 1)], float(10 * k));
      }
      // Σ over ranks q of (3r + j + q) = n(3r + j) + n(n-1)/2.
      for (int j = 0; j < 3; ++j)
        EXPECT_EQ(scattered[size_t(r)][size_t(j)], float(n * (3 * r + j) + n * (n - 1) / 2));
      EXPECT_EQ(sums[size_t(r)][0], float(n * (n + 1) / 2));
      EXPECT_EQ(maxima[size_t(r)][0], 7.f);
    }
  }
}

// Rows of logits over a vocabulary of 200 (or 100) padded to 256, targets everywhere (the last
// real column too), each rank given its columns (at 4 ranks of 100, two hold only padding): the
// same losses and normalizers on every rank as the whole rows', and each slice's gradient the whole
// gradient's columns.
TEST(TensorParallel, VocabParallelLossIsTheWholeRowsLoss) {
  for (const int64_t V : {200, 100}) {  // at 4 ranks of 100, two ranks hold padding alone
    const int64_t M = 7, Vp = 256;
    std::vector<float> logits(static_cast<size_t>(M * Vp));
    fill_normal(logits.data(), logits.size(), 3, 0, 0, 0.f, 2.f);
    const std::vector<int32_t> targets = {0, 5, 63, 64, 99, int32_t(V / 2), int32_t(V - 1)};
    std::vector<float> want_losses(static_cast<size_t>(M)), want_shifts(static_cast<size_t>(M)),
        want_grad(logits.size());
    cross_entropy_forward(want_losses.data(), logits.data(), targets.data(), M, V, Vp,
                          want_shifts.data());
    const float scale = 1.f / 3;
    cross_entropy_backward(want_grad.data(), logits.data(), targets.data(), scale, M, V, Vp,
                           want_shifts.data());
    std::atomic<int64_t> compared = 0;  // gradient elements, over the ranks
    for (int n : {1, 2, 4}) {
      on_ranks(n, [&](ProcessGroup& group) {
        GroupTensorParallel tp(group, true);
        const VocabSlice s = vocab_slice(V, Vp, tp.rank(), n);
        std::vector<float> mine(static_cast<size_t>(M * s.cols)), grad(mine.size());
        for (int64_t i = 0; i < M; ++i)
          std::memcpy(&mine[size_t(i * s.cols)], &logits[size_t(i * Vp + s.first)],
                      size_t(s.cols) * sizeof(float));
        Tensor losses = Tensor::empty("losses", {M}, DType::f32);
        Tensor shifts = Tensor::empty("shifts", {M}, DType::f32);
        const double total = vocab_parallel_cross_entropy_forward(losses, shifts, mine.data(),
                                                                  targets.data(), M, s, tp);
        cross_entropy_backward_slice(grad.data(), DType::f32, mine.data(), targets.data(), scale, M,
                                     s.first, s.real(), s.cols, shifts.data<float>());
        double want_total = 0;
        for (int64_t i = 0; i < M; ++i) {
          const float loss = losses.data<float>()[i], shift = shifts.data<float>()[i];
          want_total += want_losses[size_t(i)];
          if (n == 1) {
            EXPECT_EQ(loss, want_losses[size_t(i)]) << "row " << i;
            EXPECT_EQ(shift, want_shifts[size_t(i)]) << "row " << i;
          } else {
            EXPECT_NEAR(loss, want_losses[size_t(i)], 1e-6 * std::abs(want_losses[size_t(i)]))
                << "row " << i << " at " << n << " ranks";
            EXPECT_NEAR(shift, want_shifts[size_t(i)], 1e-6 * std::abs(want_shifts[size_t(i)]));
          }
          for (int64_t j = 0; j < s.cols; ++j) {
            const float got = grad[size_t(i * s.cols + j)],
                        want = want_grad[size_t(i * Vp + s.first + j)];
            if (n == 1)
              EXPECT_EQ(got, want) << "row " << i << " column " << j;
            else
              EXPECT_NEAR(got, want, 1e-6 * scale) << "row " << i << " column " << s.first + j;
          }
        }
        EXPECT_NEAR(total, want_total, 1e-6 * want_total);
        compared += M * s.cols;
      });
    }
    EXPECT_EQ(compared.load(), 3 * M * Vp);
  }
}

// A model built of each rank's slices (Megatron's layout: heads, MLP width and vocabulary split,
// norms and the output projections' biases whole) at 2 and 4 ranks, in FP32: the same loss as
// the whole model on one process to FP32 rounding, every rank's gradient slice the whole
// gradient's elements there (the padded vocabulary rows exactly zero), and the whole parameters'
// gradients bitwise the same on every rank (nothing synchronizes them after), with each
// activation checkpointing mode (the recomputed blocks' collectives run again). In BF16, as
// close to the FP32 whole model as the whole BF16 model is (testing::expect_bf16_close_to_fp32's
// bounds).
struct GptRun {
  int ranks;
  ActivationCheckpointing mode;
  DType dtype = DType::f32;
  bool sequence_parallel = true;
};

// Sums over ranks (threads) of what one run's check needs.
struct RunTotals {
  std::mutex mutex;
  int64_t compared = 0;
  double dot = 0, n_whole = 0, n_tp = 0;       // gradients against the whole FP32 model's
  std::vector<std::vector<float>> replicated;  // each whole parameter's gradient, by rank 0
};

// A model of `make(dtype, slice)` against its whole FP32 self, on every run of `runs`.
using MakeModel = std::function<std::unique_ptr<Model>(DType, TpSlice)>;
void expect_slices_train_as_the_whole_model(const MakeModel& make,
                                            const std::vector<GptRun>& runs) {
  const Batch batch = testing::random_batch(2, 16, 5, 200);
  const float grad_scale = 1.f / 32;
  const std::unique_ptr<Model> whole_model = make(DType::f32, {});
  Model& whole = *whole_model;
  LocalParams whole_params(whole, 11);
  UnitHooks hooks;
  const double want_loss = whole.forward_backward(batch, grad_scale, hooks);
  const auto& whole_specs = whole.param_specs();
  // Each parameter's largest gradient, the scale of its rounding.
  std::vector<float> largest;
  for (size_t i = 0; i < whole_specs.size(); ++i) {
    const Tensor g = whole_params.grad(i);
    float m = 0;
    for (int64_t k = 0; k < g.numel(); ++k) m = std::max(m, std::abs(g.data<float>()[k]));
    largest.push_back(m);
  }
  for (const GptRun& run : runs) {
    const std::string what =
        fmt::format("{}: {} ranks{}, {}, {}", whole.describe(), run.ranks,
                    run.sequence_parallel ? " (sequence parallel)" : "",
                    activation_checkpointing_name(run.mode), dtype_name(run.dtype));
    const bool fp32 = run.dtype == DType::f32;
    RunTotals totals;
    totals.replicated.resize(whole_specs.size());
    on_ranks(run.ranks, [&](ProcessGroup& group) {
      GroupTensorParallel tp(group, true);
      const std::unique_ptr<Model> mine_model =
          make(run.dtype, TpSlice{tp.rank(), run.ranks, run.sequence_parallel});
      Model& mine = *mine_model;
      mine.set_tensor_parallel(&tp);
      mine.set_activation_checkpointing(run.mode);
      LocalParams params(mine, 11);
      const double loss = mine.forward_backward(batch, grad_scale, hooks);
      // KV heads shared by ranks (n_kv_head < tp) and the norms under sequence parallelism (and
      // Qwen3's q/k norms): each rank's part of their gradients, summed over the ranks as the
      // sharded model does before its update.
      std::vector<std::pair<size_t, Tensor>> grads;
      for (size_t i = 0; i < mine.param_specs().size(); ++i) grads.emplace_back(i, params.grad(i));
      TpGradientSums shared(mine.param_specs(), mine.tp_partial_grads(), grads);
      shared.sum(tp);
      if (fp32)
        EXPECT_NEAR(loss, want_loss, 1e-6 * want_loss) << what;
      else
        EXPECT_NEAR(loss / want_loss, 1.0, 0.01) << what;
      int64_t compared = 0;
      double dot = 0, n_whole = 0, n_tp = 0;
      for (size_t i = 0; i < mine.param_specs().size(); ++i) {
        const ParamSpec& spec = mine.param_specs()[i];
        const SliceMap map(spec.whole_shape(), spec.placement, spec.tp_rank, spec.tp_ranks);
        const float* got = params.grad(i).data<float>();
        const float* want = whole_params.grad(i).data<float>();
        const int64_t row = spec.shape.size() == 2 ? spec.whole_shape()[1] : 1;
        for (int64_t k = 0; k < spec.numel(); ++k) {
          const int64_t g = map.global(k);
          if (spec.real_rows >= 0 && g / row >= spec.real_rows) {
            ASSERT_EQ(got[k], 0.f) << spec.name << " padding row " << g / row << ", " << what;
          } else if (fp32) {
            ASSERT_NEAR(got[k], want[g], 1e-5f * largest[i] + 1e-12f)
                << spec.name << " element " << k << " of rank " << tp.rank() << ", " << what;
          }
          if (tp.rank() % spec.tp_replicas == 0) {  // each whole element once
            dot += double(got[k]) * want[g];
            n_whole += double(want[g]) * want[g];
            n_tp += double(got[k]) * got[k];
          }
          ++compared;
        }
      }
      std::lock_guard lock(totals.mutex);
      totals.compared += compared, totals.dot += dot, totals.n_whole += n_whole,
          totals.n_tp += n_tp;
      for (size_t i = 0; i < mine.param_specs().size(); ++i) {
        if (mine.param_specs()[i].tp_replicas != run.ranks) continue;  // replicated only
        const Tensor g = params.grad(i);
        std::vector<float> mine_g(g.data<float>(), g.data<float>() + g.numel());
        if (totals.replicated[i].empty())
          totals.replicated[i] = mine_g;
        else
          EXPECT_EQ(std::memcmp(mine_g.data(), totals.replicated[i].data(),
                                mine_g.size() * sizeof(float)),
                    0)
              << mine.param_specs()[i].name << "'s gradient differs between ranks, " << what;
      }
    });
    // Every rank's slice of every parameter, whole parameters on each rank.
    int64_t want_compared = 0;
    for (const ParamSpec& s : whole_specs)
      want_compared += s.numel() * run.ranks / slice_pieces(s.shape, s.placement, run.ranks);
    EXPECT_EQ(totals.compared, want_compared) << what;
    EXPECT_GT(totals.dot / std::sqrt(totals.n_whole * totals.n_tp), fp32 ? 0.999999 : 0.99) << what;
    EXPECT_NEAR(std::sqrt(totals.n_tp / totals.n_whole), 1.0, fp32 ? 1e-6 : 0.02) << what;
  }
}

TEST(TensorParallel, GptSlicesTrainAsTheWholeModel) {
  const GPTConfig config{2, 32, 4, 16, 200};  // 4 heads of 8; vocabulary 200 padded to 256
  expect_slices_train_as_the_whole_model(
      [&](DType dtype, TpSlice slice) { return std::make_unique<GPT>(config, dtype, slice); },
      {GptRun{2, ActivationCheckpointing::none}, GptRun{4, ActivationCheckpointing::none},
       GptRun{2, ActivationCheckpointing::full}, GptRun{4, ActivationCheckpointing::full},
       GptRun{2, ActivationCheckpointing::selective},
       GptRun{2, ActivationCheckpointing::none, DType::bf16},
       GptRun{4, ActivationCheckpointing::selective, DType::bf16},
       GptRun{2, ActivationCheckpointing::none, DType::f32, false},
       GptRun{4, ActivationCheckpointing::full, DType::f32, false},
       GptRun{2, ActivationCheckpointing::selective, DType::bf16, false}});
}

// Llama's block under the same checks: grouped-query attention (8 query heads over 4 KV heads:
// each rank keeps the KV heads its query heads use), SwiGLU's gate and up column-parallel, o
// and down row-parallel without biases, an untied lm_head; and with Qwen's additions: biases
// on q, k and v (split with their heads) and Qwen3's q/k norms over heads 6 wide (not n_embd /
// n_head), whose whole weights get each rank's heads' gradients summed over the group.
TEST(TensorParallel, LlamaAndQwenSlicesTrainAsTheWholeModel) {
  LlamaConfig llama;
  llama.n_layer = 2, llama.n_embd = 32, llama.n_head = 8, llama.n_kv_head = 4;
  llama.ffn_hidden = 48, llama.block_size = 16, llama.vocab_size = 200;
  llama.tie_embeddings = false;
  LlamaConfig qwen = llama;
  qwen.head_dim = 6, qwen.qkv_bias = true, qwen.qk_norm = true, qwen.tie_embeddings = true;
  qwen.name = "Qwen3";
  for (const LlamaConfig& config : {llama, qwen})
    expect_slices_train_as_the_whole_model(
        [&](DType dtype, TpSlice slice) { return std::make_unique<Llama>(config, dtype, slice); },
        {GptRun{2, ActivationCheckpointing::none}, GptRun{4, ActivationCheckpointing::none},
         GptRun{4, ActivationCheckpointing::full}, GptRun{2, ActivationCheckpointing::selective},
         GptRun{2, ActivationCheckpointing::none, DType::bf16},
         GptRun{2, ActivationCheckpointing::none, DType::f32, false},
         GptRun{4, ActivationCheckpointing::selective, DType::f32, false}});
}

// Fewer KV heads than ranks: each rank keeps the KV head its query heads use (8 query heads over
// 2 KV heads at tp 4: ranks 0-1 share KV head 0, ranks 2-3 head 1; one KV head, multi-query, at
// tp 2: both share it), k and v (and Qwen's biases and k norm) with each rank's part of the
// gradient summed over the ranks sharing them (TpGradientSums). A KV head count that neither
// divides nor is divided by tp is refused by name.
TEST(TensorParallel, SharedKvHeadsTrainAsTheWholeModel) {
  LlamaConfig gqa;
  gqa.n_layer = 2, gqa.n_embd = 32, gqa.n_head = 8, gqa.n_kv_head = 2;
  gqa.ffn_hidden = 48, gqa.block_size = 16, gqa.vocab_size = 200;
  LlamaConfig qwen = gqa;
  qwen.head_dim = 6, qwen.qkv_bias = true, qwen.qk_norm = true, qwen.name = "Qwen3";
  LlamaConfig mqa = gqa;
  mqa.n_kv_head = 1;
  for (const LlamaConfig& config : {gqa, qwen})
    expect_slices_train_as_the_whole_model(
        [&](DType dtype, TpSlice slice) { return std::make_unique<Llama>(config, dtype, slice); },
        {GptRun{4, ActivationCheckpointing::none},
         GptRun{4, ActivationCheckpointing::full, DType::f32, false},
         GptRun{4, ActivationCheckpointing::none, DType::bf16}});
  expect_slices_train_as_the_whole_model(
      [&](DType dtype, TpSlice slice) { return std::make_unique<Llama>(mqa, dtype, slice); },
      {GptRun{2, ActivationCheckpointing::selective}, GptRun{4, ActivationCheckpointing::none}});
  LlamaConfig three = gqa;
  three.n_head = 6, three.n_kv_head = 3, three.n_embd = 36;
  try {
    Llama model(three, DType::f32, TpSlice{0, 2});
    ADD_FAILURE() << "3 KV heads split over 2 ranks";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("n_kv_head 3"), std::string::npos) << e.what();
  }
}

// A model built whole (a family without a tensor-parallel plan builds only that) refuses a group
// of more than one rank, a GPT built for one rank of 2 a group where it is another rank, and a
// split that does not divide the heads is refused by name.
// The collectives a model's work lists for each segment of a micro-batch (Model::work, which the
// simulator replays) are the ones its forward and backward issue, in order, with their buffers'
// bytes: GPT (norms with biases), Llama with grouped-query attention and Qwen3 (q/k norms), with
// and without sequence parallelism, under each activation checkpointing mode, in FP32 and BF16.
class RecordingTensorParallel final : public TensorParallel {
 public:
  explicit RecordingTensorParallel(TensorParallel& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void all_reduce_sum(const Tensor& b) override {
    log(TpOp::all_reduce, b);
    inner_.all_reduce_sum(b);
  }
  void all_reduce_max(const Tensor& b) override {
    log(TpOp::all_reduce, b);
    inner_.all_reduce_max(b);
  }
  void all_gather(const Tensor& in, const Tensor& out) override {
    log(TpOp::all_gather, out);
    inner_.all_gather(in, out);
  }
  void reduce_scatter_sum(const Tensor& in, const Tensor& out) override {
    log(TpOp::reduce_scatter, in);
    inner_.reduce_scatter_sum(in, out);
  }
  std::vector<TpCollective>* into = nullptr;  // the current segment's list

 private:
  void log(TpOp op, const Tensor& buffer) {
    ASSERT_NE(into, nullptr) << "a TP collective outside every segment";
    into->push_back({op, double(buffer.nbytes())});
  }
  TensorParallel& inner_;
};

// Switches the recording to the segment each hook opens: ModelWork's segments, block by block.
struct SegmentHooks final : UnitHooks {
  RecordingTensorParallel& tp;
  ModelWork seen;
  std::vector<std::vector<TpCollective>> block_forward, block_backward;
  explicit SegmentHooks(RecordingTensorParallel& t) : tp(t) {}
  void before_forward(int u) override {
    if (u == 0)
      tp.into = &seen.root_forward_pre.tp;
    else
      tp.into = &block_forward.emplace_back();
  }
  void after_forward(int u) override { tp.into = u == 0 ? nullptr : &seen.root_forward_post.tp; }
  void before_backward(int u) override {
    if (u == 0)
      tp.into = &seen.root_backward_pre.tp;
    else
      tp.into = &block_backward.emplace_back();
  }
  void after_backward(int u) override { tp.into = u == 0 ? nullptr : &seen.root_backward_post.tp; }
};

std::string describe_calls(const std::vector<TpCollective>& calls) {
  std::string s;
  for (const TpCollective& c : calls)
    s += fmt::format(" {}:{}",
                     c.op == TpOp::all_gather       ? "AG"
                     : c.op == TpOp::reduce_scatter ? "RS"
                                                    : "AR",
                     c.bytes);
  return s;
}

TEST(TensorParallel, WorkListsTheCollectivesTheModelRuns) {
  LlamaConfig llama;
  llama.n_layer = 2, llama.n_embd = 32, llama.n_head = 8, llama.n_kv_head = 4;
  llama.ffn_hidden = 48, llama.block_size = 16, llama.vocab_size = 200;
  LlamaConfig qwen = llama;
  qwen.head_dim = 6, qwen.qkv_bias = true, qwen.qk_norm = true;
  const std::vector<std::pair<std::string, MakeModel>> models{
      {"GPT",
       [](DType d, TpSlice s) {
         return std::make_unique<GPT>(GPTConfig{2, 32, 4, 16, 200}, d, s);
       }},
      {"Llama", [&](DType d, TpSlice s) { return std::make_unique<Llama>(llama, d, s); }},
      {"Qwen3", [&](DType d, TpSlice s) { return std::make_unique<Llama>(qwen, d, s); }}};
  const Batch batch = testing::random_batch(2, 16, 5, 200);
  int compared = 0;
  for (const auto& model_case : models)  // not a structured binding: clang 14 cannot capture one
    for (const bool sp : {true, false})
      for (const ActivationCheckpointing mode :
           {ActivationCheckpointing::none, ActivationCheckpointing::selective,
            ActivationCheckpointing::full})
        for (const DType dtype : {DType::f32, DType::bf16}) {
          const std::string what =
              fmt::format("{}{}, {}, {}", model_case.first, sp ? " (sequence parallel)" : "",
                          activation_checkpointing_name(mode), dtype_name(dtype));
          on_ranks(2, [&](ProcessGroup& group) {
            GroupTensorParallel inner(group, true);
            RecordingTensorParallel tp(inner);
            const std::unique_ptr<Model> model =
                model_case.second(dtype, TpSlice{inner.rank(), 2, sp});
            model->set_tensor_parallel(&tp);
            model->set_activation_checkpointing(mode);
            LocalParams params(*model, 11);
            SegmentHooks hooks(tp);
            model->forward_backward(batch, 1.f / 32, hooks);
            if (inner.rank() != 0) return;
            const ModelWork want = model->work(batch.B(), batch.T());
            const std::pair<const char*, std::pair<const SegmentWork*, const SegmentWork*>>
                roots[] = {{"root forward (embedding)",
                            {&hooks.seen.root_forward_pre, &want.root_forward_pre}},
                           {"root forward (head)",
                            {&hooks.seen.root_forward_post, &want.root_forward_post}},
                           {"root backward (head)",
                            {&hooks.seen.root_backward_pre, &want.root_backward_pre}},
                           {"root backward (embedding)",
                            {&hooks.seen.root_backward_post, &want.root_backward_post}}};
            for (const auto& [segment, pair] : roots)
              EXPECT_EQ(pair.first->tp, pair.second->tp)
                  << what << ", " << segment << ": ran" << describe_calls(pair.first->tp)
                  << "; listed" << describe_calls(pair.second->tp);
            ASSERT_EQ(hooks.block_forward.size(), 2u);
            ASSERT_EQ(hooks.block_backward.size(), 2u);
            for (size_t l = 0; l < 2; ++l) {
              EXPECT_EQ(hooks.block_forward[l], want.block_forward.tp)
                  << what << ", block forward: ran" << describe_calls(hooks.block_forward[l])
                  << "; listed" << describe_calls(want.block_forward.tp);
              EXPECT_EQ(hooks.block_backward[l], want.block_backward.tp)
                  << what << ", block backward: ran" << describe_calls(hooks.block_backward[l])
                  << "; listed" << describe_calls(want.block_backward.tp);
            }
            EXPECT_FALSE(want.block_forward.tp.empty()) << what;
            ++compared;
          });
        }
  EXPECT_EQ(compared, 3 * 2 * 3 * 2);
}

TEST(TensorParallel, AModelRefusesAGroupItWasNotBuiltFor) {
  on_ranks(2, [&](ProcessGroup& group) {
    GroupTensorParallel tp(group, true);
    GPT gpt(GPTConfig{1, 32, 4, 16, 256}, DType::f32, TpSlice{1 - tp.rank(), 2});
    EXPECT_THROW(gpt.set_tensor_parallel(&tp), Error);
    GPT built_whole(GPTConfig{1, 32, 4, 16, 256}, DType::f32);
    EXPECT_THROW(built_whole.set_tensor_parallel(&tp), Error);
  });
  EXPECT_THROW(GPT(GPTConfig{1, 32, 4, 16, 256}, DType::f32, TpSlice{0, 3}), InputError);
}

// Sequence parallelism keeps 1/tp of the residual stream per rank: the L+1 block inputs, the L
// attention outputs x_mid and the stream's gradient, FP32 [B·T, C] each, at half their size on
// 2 ranks; it adds the reduce-scatter's result (FP32 [B·T/2, C]), the norms' partial gradients
// (FP32 [2C]) and halves the norms' statistics. Counted by hand against the model's arena.
TEST(TensorParallel, SequenceParallelismSplitsTheResidualStream) {
  const int64_t L = 3, C = 32, B = 2, T = 16, M = B * T;
  const GPTConfig config{L, C, 4, T, 256};
  const GPT plain(config, DType::f32, TpSlice{0, 2, false});
  const GPT split(config, DType::f32, TpSlice{0, 2, true});
  const int64_t f = int64_t(sizeof(float));
  const int64_t stream = (2 * L + 2) * M * C * f;  // x[0..L], x_mid, d_x
  const int64_t stats = (4 * L + 2) * M * f;       // mean and rstd of 2L + 1 LayerNorms
  const int64_t added = M / 2 * C * f + 2 * C * f;
  const int64_t want = stream / 2 + stats / 2 - added;
  const int64_t saved = plain.activation_bytes(B, T) - split.activation_bytes(B, T);
  // The arena rounds each tensor up to its alignment: within 64 bytes a tensor.
  EXPECT_NEAR(double(saved), double(want), 64.0 * (4 * L + 8)) << "saved " << saved;
  EXPECT_GT(saved, stream / 3);
  // A sequence the group cannot split is refused by name (the config refuses it earlier).
  on_ranks(2, [&](ProcessGroup& group) {
    GroupTensorParallel tp(group, true);
    GPT gpt(config, DType::f32, TpSlice{tp.rank(), 2, true});
    gpt.set_tensor_parallel(&tp);
    LocalParams params(gpt, 1);
    UnitHooks hooks;
    try {
      gpt.forward_loss(testing::random_batch(1, 15, 5, 200), hooks);
      ADD_FAILURE() << "a sequence of 15 tokens split over 2 ranks";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("15 tokens long"), std::string::npos) << e.what();
    }
  });
}

}  // namespace
}  // namespace st
