// Each family's parallelize plan (models/NAME/parallelize.cpp): the FSDP units the model code no
// longer sets, the placements tensor parallelism will read, and initialization that is the
// same values however a parameter is split, along dimension 1 too.
#include <gtest/gtest.h>

#include <cstring>

#include "core/error.hpp"
#include "core/model/param_plan.hpp"
#include "models/gpt2/gpt.hpp"
#include "models/llama/llama.hpp"

namespace st {
namespace {

const ParamSpec& spec(const Model& m, const std::string& name) {
  for (const ParamSpec& s : m.param_specs())
    if (s.name == name) return s;
  throw Error("no parameter " + name);
}

// Block l's parameters in unit l + 1, every other one in the root unit 0: as each constructor
// set them by hand before.
void expect_block_units(const Model& m, const std::string& prefix) {
  int in_blocks = 0;
  for (const ParamSpec& s : m.param_specs()) {
    int64_t want = 0;
    if (s.name.rfind(prefix, 0) == 0) {
      want = std::stoll(s.name.substr(prefix.size())) + 1;
      ++in_blocks;
    }
    EXPECT_EQ(s.unit, want) << s.name;
  }
  EXPECT_GT(in_blocks, 0);
}

TEST(Parallelize, Gpt2UnitsAndMegatronPlacements) {
  const GPT gpt(GPTConfig{3, 32, 4, 16, 256}, DType::f32);
  expect_block_units(gpt, "transformer.h.");
  EXPECT_EQ(spec(gpt, "transformer.h.2.attn.c_attn.weight").placement, Placement::shard(1, 8, 3));
  EXPECT_EQ(spec(gpt, "transformer.h.0.attn.c_attn.bias").placement, Placement::shard(0, 8, 3));
  EXPECT_EQ(spec(gpt, "transformer.h.0.attn.c_proj.weight").placement, Placement::shard(0, 8));
  EXPECT_EQ(spec(gpt, "transformer.h.0.attn.c_proj.bias").placement, Placement{});
  EXPECT_EQ(spec(gpt, "transformer.h.1.mlp.c_fc.weight").placement, Placement::shard(1));
  EXPECT_EQ(spec(gpt, "transformer.h.1.mlp.c_proj.weight").placement, Placement::shard(0));
  EXPECT_EQ(spec(gpt, "transformer.wte.weight").placement, Placement::shard(0));
  EXPECT_EQ(spec(gpt, "transformer.wpe.weight").placement, Placement{});
  EXPECT_EQ(spec(gpt, "transformer.ln_f.weight").placement, Placement{});
}

TEST(Parallelize, LlamaQwenUnitsAndPlacements) {
  LlamaConfig c;
  c.n_layer = 2, c.n_embd = 64, c.n_head = 4, c.n_kv_head = 2, c.head_dim = 16;
  c.ffn_hidden = 96, c.qkv_bias = true, c.qk_norm = true, c.tie_embeddings = false;
  const Llama llama(c, DType::f32);
  expect_block_units(llama, "model.layers.");
  EXPECT_EQ(spec(llama, "model.layers.1.self_attn.k_proj.weight").placement,
            Placement::shard(0, 16));
  EXPECT_EQ(spec(llama, "model.layers.1.self_attn.v_proj.bias").placement, Placement::shard(0, 16));
  EXPECT_EQ(spec(llama, "model.layers.0.self_attn.o_proj.weight").placement,
            Placement::shard(1, 16));
  EXPECT_EQ(spec(llama, "model.layers.0.mlp.down_proj.weight").placement, Placement::shard(1));
  EXPECT_EQ(spec(llama, "model.layers.0.self_attn.q_norm.weight").placement, Placement{});
  EXPECT_EQ(spec(llama, "lm_head.weight").placement, Placement::shard(0));
  EXPECT_EQ(spec(llama, "lm_head.weight").unit, 0);
  EXPECT_EQ(block_of_param("model.layers.12.mlp.up_proj.weight", "model.layers."), 12);
  EXPECT_EQ(block_of_param("model.norm.weight", "model.layers."), -1);
  EXPECT_THROW(block_of_param("model.layers.x.mlp", "model.layers."), Error);
}

// GPT-2's fused c_attn [C, 3C] cut as tensor parallelism will cut it at 2 ranks: each rank's
// columns of q, k and v (whole heads), row by row, computed from the global element index alone,
// equal bitwise the whole parameter's values there.
TEST(Parallelize, InitIsTheSameValuesForSplitsAlongDimensionOne) {
  const GPT gpt(GPTConfig{1, 32, 4, 16, 256}, DType::f32);
  size_t index = 0;
  while (gpt.param_specs()[index].name != "transformer.h.0.attn.c_attn.weight") ++index;
  const ParamSpec& s = gpt.param_specs()[index];
  const int64_t rows = s.shape[0], cols = s.shape[1];
  std::vector<float> whole(size_t(s.numel()));
  init_param_elements(s, 42, index, 0, whole.size(), whole.data());
  const int ranks = 2;
  const int64_t part = cols / s.placement.parts, piece = part / ranks;
  ASSERT_EQ(piece % s.placement.block, 0);
  int64_t compared = 0;
  for (int t = 0; t < ranks; ++t)
    for (int64_t p = 0; p < s.placement.parts; ++p)
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t first = r * cols + p * part + t * piece;
        std::vector<float> mine(static_cast<size_t>(piece));
        init_param_elements(s, 42, index, uint64_t(first), mine.size(), mine.data());
        ASSERT_EQ(std::memcmp(mine.data(), whole.data() + first, mine.size() * sizeof(float)), 0)
            << "rank " << t << ", part " << p << ", row " << r;
        compared += piece;
      }
  EXPECT_EQ(compared, s.numel());
}

}  // namespace
}  // namespace st
