#include "parallel/shared_slice_grads.hpp"

#include <cmath>
#include <cstring>

#include "core/error.hpp"

namespace st {
namespace {

bool shared(const ParamSpec& spec) {
  return spec.sliced() && spec.tp_replicas > 1;
}
int pieces_of(const ParamSpec& spec) {
  return spec.tp_ranks / spec.tp_replicas;
}

}  // namespace

double SharedSliceGrads::predicted_bytes(const std::vector<ParamSpec>& specs, int dp_shard) {
  double numel = 0;
  int pieces = 1;
  for (const ParamSpec& spec : specs)
    if (shared(spec)) numel += double(spec.numel()), pieces = pieces_of(spec);
  return numel > 0 ? double(pieces) * std::ceil(numel / dp_shard) * sizeof(float) : 0;
}

SharedSliceGrads::SharedSliceGrads(const std::vector<ParamSpec>& specs,
                                   const std::vector<std::pair<size_t, Tensor>>& grads) {
  for (const auto& [param, grad] : grads) {
    const ParamSpec& spec = specs.at(param);
    if (!shared(spec)) continue;
    const int pieces = pieces_of(spec), piece = spec.tp_rank / spec.tp_replicas;
    // Every shared parameter of a model is shared alike (one KV head per rank when n_kv_head
    // < tp), so one buffer with a slot per piece serves them all.
    ST_CHECK(grads_.empty() || (pieces == pieces_ && piece == piece_),
             "{}: shared over {} pieces, other shared parameters over {}", spec.name, pieces,
             pieces_);
    pieces_ = pieces, piece_ = piece;
    ST_CHECK(grad.dtype() == DType::f32, "{}: a {} gradient", spec.name, dtype_name(grad.dtype()));
    grads_.push_back(grad);
    numel_ += grad.numel();
  }
}

void SharedSliceGrads::sum(TensorParallel& tp) {
  if (grads_.empty()) return;
  if (!buffer_.defined())
    buffer_ = Tensor::empty("shared_slice_grads", {int64_t(pieces_) * numel_}, DType::f32);
  float* all = buffer_.data<float>();
  std::memset(all, 0, size_t(buffer_.numel()) * sizeof(float));
  float* mine = all + int64_t(piece_) * numel_;
  for (const Tensor& g : grads_) {
    std::memcpy(mine, g.data<float>(), size_t(g.numel()) * sizeof(float));
    mine += g.numel();
  }
  tp.all_reduce_sum(buffer_);
  const float* summed = all + int64_t(piece_) * numel_;
  for (const Tensor& g : grads_) {
    std::memcpy(g.data<float>(), summed, size_t(g.numel()) * sizeof(float));
    summed += g.numel();
  }
}

}  // namespace st
