#pragma once
// What a model declares about each parameter, before any memory exists.
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.hpp"

namespace st {

enum class InitKind : uint8_t { normal, zeros, ones };

// How a parameter may be split across the ranks of a tensor-parallel group: kept whole on each
// (replicate), or cut along `dim`, which is made of `parts` equal segments (3 for a fused
// q/k/v), each cut into as many equal pieces as ranks, at multiples of `block` (one head's rows
// stay together); rank t keeps piece t of every segment. With `shares_blocks`, a segment of
// fewer blocks than ranks (whose count divides the ranks) is cut into one block per piece, and
// each piece is kept by ranks/blocks consecutive ranks: grouped-query attention's KV heads when
// n_kv_head < tp, each rank keeping the KV head its query heads use (Megatron's choice). A
// family's parallelize plan (models/NAME/parallelize.cpp) sets it; tensor parallelism reads it.
struct Placement {
  enum class Kind : uint8_t { replicate, shard };
  Kind kind = Kind::replicate;
  int dim = 0;
  int64_t parts = 1;
  int64_t block = 1;
  bool shares_blocks = false;
  static Placement shard(int dim, int64_t block = 1, int64_t parts = 1) {
    return {Kind::shard, dim, parts, block};
  }
  Placement sharing_blocks() const {
    Placement p = *this;
    p.shares_blocks = true;
    return p;
  }
  bool operator==(const Placement&) const = default;
};

struct ParamSpec {
  std::string name;  // Hugging Face name, e.g. "transformer.h.0.attn.c_attn.weight"
  Shape shape;
  InitKind init = InitKind::zeros;
  float init_std = 0.f;  // for InitKind::normal (mean 0)
  bool weight_decay = false;
  int unit = 0;  // the FSDP unit this parameter belongs to (a family's plan sets it)
  // Rows (of the first dimension) that are real; the rest pad it for aligned matmuls (a vocabulary
  // of 50,257 stored as 50,304): zero from the start, never exported. -1: every row is real.
  int64_t real_rows = -1;
  Placement placement = {};
  // The slice of the whole parameter `shape` is, under tensor parallelism: rank tp_rank's of
  // tp_ranks (core/model/param_slice.hpp). Initialization, real_rows and real_shape() speak of
  // the whole parameter.
  int tp_rank = 0;
  int tp_ranks = 1;
  // How many of the group's ranks hold this same slice: 1 for a parameter split once per rank,
  // tp_ranks for a replicated one, between for shared blocks (Placement::shares_blocks: there
  // each rank's gradient is its query heads' part, summed over the sharing ranks before the
  // update). The gradient norm counts the first of them.
  int tp_replicas = 1;
  int64_t numel() const { return shape_numel(shape); }
  bool sliced() const { return tp_ranks > 1 && placement.kind == Placement::Kind::shard; }
  // The whole parameter's shape (`shape` itself unless sliced).
  Shape whole_shape() const {
    Shape s = shape;
    if (sliced()) s[size_t(placement.dim)] *= tp_ranks / tp_replicas;
    return s;
  }
  // The shape files outside shardtrain see (safetensors exports): the real rows only.
  Shape real_shape() const {
    Shape s = whole_shape();
    if (real_rows >= 0 && !s.empty()) s[0] = real_rows;
    return s;
  }
  int64_t real_numel() const { return shape_numel(real_shape()); }
};

// Elements [first, first + n) of parameter `param_index` (of its slice, when sliced), each a
// pure function of (seed, param_index, the whole parameter's element index): the same values
// whoever computes them, however split.
void init_param_elements(const ParamSpec& spec, uint64_t seed, uint64_t param_index, uint64_t first,
                         size_t n, float* dst);

}  // namespace st
