// Each family's parallelize plan (models/NAME/parallelize.cpp): the FSDP units the model code no
// longer sets, the placements tensor parallelism will read, and initialization that is the
// same values however a parameter is split, along dimension 1 too.
#include <gtest/gtest.h>

#include <cstring>

#include "core/error.hpp"
#include "core/model/param_plan.hpp"
#include "core/model/param_slice.hpp"
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
  // KV heads are shared by ranks when fewer than them (each rank keeping its queries' one).
  EXPECT_EQ(spec(llama, "model.layers.1.self_attn.k_proj.weight").placement,
            Placement::shard(0, 16).sharing_blocks());
  EXPECT_EQ(spec(llama, "model.layers.1.self_attn.v_proj.bias").placement,
            Placement::shard(0, 16).sharing_blocks());
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

namespace st {
namespace {

// Where whole element `g` of `whole` goes under `p` over `ranks`, by coordinates (the
// definition in param_spec.hpp, independently of SliceMap's strides): {rank, local index}.
std::pair<int, int64_t> owner_of(const Shape& whole, const Placement& p, int ranks, int64_t g) {
  int64_t inner = 1;
  for (size_t d = size_t(p.dim) + 1; d < whole.size(); ++d) inner *= whole[d];
  const int64_t extent = whole[size_t(p.dim)], segment = extent / p.parts, piece = segment / ranks;
  const int64_t outer = g / (extent * inner), along = g / inner % extent, in = g % inner;
  const int64_t part = along / segment, within = along % segment;
  const int rank = int(within / piece);
  const int64_t local_along = part * piece + within % piece;
  return {rank, (outer * (extent / ranks) + local_along) * inner + in};
}

// Shared blocks, by hand: 2 KV heads of 4 rows (3 columns) over 4 ranks are 2 pieces, ranks 0
// and 1 keeping head 0 (rows 0-3), ranks 2 and 3 head 1; an element is named as the first
// holder's. At 2 ranks nothing is shared; at 3, neither count divides the other: refused.
TEST(ParamSlice, SharedBlocksGoToTheRanksWhoseQueriesUseThem) {
  const Shape whole{8, 3};
  const Placement kv = Placement::shard(0, 4).sharing_blocks();
  EXPECT_EQ(slice_pieces(whole, kv, 4), 2);
  EXPECT_EQ(slice_pieces(whole, kv, 2), 2);
  EXPECT_EQ(slice_pieces(whole, Placement::shard(0, 4), 4), 4);
  EXPECT_EQ(slice_shape("k", whole, kv, 4), (Shape{4, 3}));
  for (int t = 0; t < 4; ++t) {
    const SliceMap map(whole, kv, t, 4);
    for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(map.global(i), (t / 2) * 12 + i) << t << " " << i;
  }
  const SlicePlace head1 = slice_place(whole, kv, 4, 12 + 5);
  EXPECT_EQ(head1.rank, 2);
  EXPECT_EQ(head1.local, 5);
  EXPECT_EQ(head1.run, 7);
  EXPECT_EQ(slice_place(whole, kv, 4, 11).rank, 0);
  EXPECT_EQ(slice_place(whole, kv, 2, 12).rank, 1);
  std::vector<ParamSpec> specs{{"k", whole, InitKind::normal, 0.02f}};
  specs[0].placement = kv;
  slice_param_specs(specs, 3, 4);
  EXPECT_EQ(specs[0].tp_replicas, 2);
  EXPECT_EQ(specs[0].whole_shape(), whole);
  EXPECT_THROW(slice_shape("k", whole, kv, 3), InputError);
}

TEST(ParamSlice, EveryElementHasOneOwnerAtTheCoordinatesItsPlacementSays) {
  struct Case {
    Shape whole;
    Placement p;
  };
  const Case cases[] = {{{6, 12}, Placement::shard(1, 2, 3)},  // a fused q/k/v, heads of 2
                        {{5, 72}, Placement::shard(1, 2, 3)},  // the same at 3 and 4 ranks
                        {{24, 3}, Placement::shard(0, 2)},     // heads of 2 rows, 3 and 4 ranks
                        {{8, 5}, Placement::shard(0, 2)},      // row-parallel, heads of 2
                        {{24}, Placement::shard(0, 4, 3)},     // a fused bias
                        {{4, 6, 8}, Placement::shard(1)},      // a middle dimension
                        {{7, 3}, Placement{}}};
  int64_t compared = 0;
  for (const Case& c : cases)
    for (int ranks : {1, 2, 3, 4}) {
      if (c.p.kind == Placement::Kind::shard &&
          c.whole[size_t(c.p.dim)] % (c.p.parts * c.p.block * ranks) != 0)
        continue;
      const int64_t numel = shape_numel(c.whole);
      std::vector<int> seen(size_t(numel), 0);
      for (int t = 0; t < ranks; ++t) {
        const Shape local = slice_shape("w", c.whole, c.p, ranks);
        const SliceMap map(c.whole, c.p, t, ranks);
        for (int64_t i = 0; i < shape_numel(local); ++i) {
          const int64_t g = map.global(i);
          ASSERT_TRUE(g >= 0 && g < numel) << shape_string(c.whole) << " rank " << t << " " << i;
          ++seen[size_t(g)];
          if (c.p.kind == Placement::Kind::shard) {
            EXPECT_EQ(owner_of(c.whole, c.p, ranks, g), std::make_pair(t, i))
                << shape_string(c.whole) << " element " << g;
          }
          ++compared;
        }
      }
      const int64_t want = c.p.kind == Placement::Kind::shard ? 1 : ranks;
      for (int64_t g = 0; g < numel; ++g) ASSERT_EQ(seen[size_t(g)], want) << g;
      // slice_place, the inverse: each element's owner, and a run that ends where the owner's
      // next element stops being the whole's next.
      for (int64_t g = 0; g < numel; ++g) {
        const SlicePlace at = slice_place(c.whole, c.p, ranks, g);
        const auto [rank, local] = c.p.kind == Placement::Kind::shard
                                       ? owner_of(c.whole, c.p, ranks, g)
                                       : std::make_pair(0, g);
        ASSERT_EQ(std::make_pair(at.rank, at.local), std::make_pair(rank, local))
            << shape_string(c.whole) << " at " << ranks << " ranks, element " << g;
        ASSERT_TRUE(at.run >= 1 && g + at.run <= numel) << g;
        const SlicePlace last = slice_place(c.whole, c.p, ranks, g + at.run - 1);
        EXPECT_EQ(std::make_pair(last.rank, last.local), std::make_pair(rank, local + at.run - 1));
        if (g + at.run < numel) {
          const SlicePlace next = slice_place(c.whole, c.p, ranks, g + at.run);
          EXPECT_FALSE(next.rank == rank && next.local == local + at.run) << g;
        }
      }
    }
  EXPECT_GT(compared, 500);
}

// What reads and writes whole parameters (safetensors exports, Hugging Face folders) refuses
// slices by name; whole specs pass.
TEST(ParamSlice, WholeParameterFilesRefuseSlices) {
  const GPT gpt(GPTConfig{1, 32, 4, 16, 256}, DType::f32);
  EXPECT_NO_THROW(check_not_sliced(gpt.param_specs(), "an export"));
  const GPT sliced(GPTConfig{1, 32, 4, 16, 256}, DType::f32, TpSlice{1, 2});
  try {
    check_not_sliced(sliced.param_specs(), "an export");
    FAIL() << "a sliced model passed";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("transformer.wte.weight"), std::string::npos) << e.what();
  }
}

TEST(ParamSlice, SplitsThatDoNotDivideAreRefusedNamingTheParameter) {
  EXPECT_EQ(slice_shape("w", {6, 12}, Placement::shard(1, 2, 3), 2), (Shape{6, 6}));
  try {
    slice_shape("h.0.attn.c_attn.weight", {6, 12}, Placement::shard(1, 4, 3), 2);
    FAIL() << "a head of 4 columns split in 2 pieces of 2";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("h.0.attn.c_attn.weight"), std::string::npos) << e.what();
  }
  EXPECT_THROW(slice_shape("w", {5, 3}, Placement::shard(0), 2), InputError);
  EXPECT_THROW(slice_shape("w", {4}, Placement::shard(1), 2), InputError);
}

// Every parameter of GPT-2 (the fused c_attn along dimension 1, the padded, vocabulary-parallel
// wte along 0) and of Qwen3 (q/k norms replicated), sliced for each rank of 2 and 4: the slice
// initializes to the whole parameter's values at its elements, bitwise, and the slices' sizes add
// up to the whole's (replicated ones once per rank).
void expect_sliced_init_is_the_whole(const std::vector<ParamSpec>& whole_specs, int ranks) {
  int64_t compared = 0;
  for (size_t index = 0; index < whole_specs.size(); ++index) {
    const ParamSpec& whole = whole_specs[index];
    std::vector<float> all(size_t(whole.numel()));
    init_param_elements(whole, 7, index, 0, all.size(), all.data());
    for (int t = 0; t < ranks; ++t) {
      std::vector<ParamSpec> specs{whole};
      slice_param_specs(specs, t, ranks);
      const ParamSpec& mine = specs[0];
      EXPECT_EQ(mine.whole_shape(), whole.shape) << whole.name;
      EXPECT_EQ(mine.real_shape(), whole.real_shape()) << whole.name;
      // In two calls split mid-run, as an FSDP shard boundary may split it.
      std::vector<float> local(size_t(mine.numel()));
      const size_t half = local.size() / 2 + 1;
      init_param_elements(mine, 7, index, 0, std::min(half, local.size()), local.data());
      if (half < local.size())
        init_param_elements(mine, 7, index, half, local.size() - half, local.data() + half);
      const SliceMap map(whole.shape, whole.placement, t, ranks);
      for (size_t i = 0; i < local.size(); ++i) {
        const float want = all[size_t(map.global(int64_t(i)))];
        ASSERT_EQ(std::memcmp(&local[i], &want, sizeof(float)), 0)
            << whole.name << " rank " << t << " of " << ranks << ", element " << i;
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 0);
}

TEST(ParamSlice, SlicesInitializeToTheWholeParametersValues) {
  const GPT gpt(GPTConfig{2, 32, 4, 16, 200}, DType::f32);  // V 200 padded to 256: rows pad
  LlamaConfig c;
  c.n_layer = 1, c.n_embd = 64, c.n_head = 4, c.n_kv_head = 4, c.head_dim = 16;
  c.ffn_hidden = 96, c.qkv_bias = true, c.qk_norm = true, c.tie_embeddings = false;
  const Llama qwen3(c, DType::f32);
  for (int ranks : {2, 4}) {
    expect_sliced_init_is_the_whole(gpt.param_specs(), ranks);
    expect_sliced_init_is_the_whole(qwen3.param_specs(), ranks);
  }
}

}  // namespace
}  // namespace st
