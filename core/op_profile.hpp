#pragma once
// Where a thread's time goes, by kind of work: every op opens an OpScope, and the time between
// two scope changes is charged to the innermost open scope only (a matmul inside attention
// counts as matmul, not twice). Always on: a scope costs two clock reads. Each thread keeps its
// own profile, so the communication thread's work never mixes into the compute thread's.
#include <array>
#include <cstdint>
#include <string_view>

namespace st {

enum class OpKind : int {
  other = 0,  // inside a step but in no op (hooks, bookkeeping)
  matmul,     // oneDNN matmuls, attention's included
  attention,  // attention's softmax, masks and layout work around its matmuls
  layernorm,
  gelu,
  rmsnorm,
  rope,
  swiglu,
  cross_entropy,
  embedding,
  bias_grad,        // bias gradients (column sums of an output gradient)
  cast_copy,        // dtype casts, residual adds and copies
  optimizer,        // gradient norm, clipping and the optimizer update
  quantize,         // quantized collectives' encoding and decoding (sharding.*_quantization)
  collective_wait,  // compute blocked on a collective
  recompute,        // activation checkpointing's second forward (all its ops)
  count
};
constexpr int kOpKinds = int(OpKind::count);

std::string_view op_kind_name(OpKind kind);

// Milliseconds by kind.
using OpTimes = std::array<double, kOpKinds>;

// This thread's accumulated times since its last reset.
OpTimes thread_op_times();
void reset_thread_op_times();

class OpScope {
 public:
  explicit OpScope(OpKind kind);
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  OpKind previous_;
};

// While one is alive on this thread, every op's time is charged to OpKind::recompute.
class RecomputeScope {
 public:
  RecomputeScope();
  ~RecomputeScope();
  RecomputeScope(const RecomputeScope&) = delete;
  RecomputeScope& operator=(const RecomputeScope&) = delete;

 private:
  OpScope scope_;
};

}  // namespace st
