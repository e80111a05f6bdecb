#include "parallel/tp_gradient_sums.hpp"

#include <algorithm>
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
bool listed(const std::vector<size_t>& partial, size_t param) {
  return std::find(partial.begin(), partial.end(), param) != partial.end();
}

// Copies `grads` one after another into `to`.
void pack(const std::vector<Tensor>& grads, float* to) {
  for (const Tensor& g : grads) {
    std::memcpy(to, g.data<float>(), g.nbytes());
    to += g.numel();
  }
}
void unpack(const float* from, const std::vector<Tensor>& grads) {
  for (const Tensor& g : grads) {
    std::memcpy(g.data<float>(), from, g.nbytes());
    from += g.numel();
  }
}

}  // namespace

double TpGradientSums::predicted_bytes(const std::vector<ParamSpec>& specs,
                                       const std::vector<size_t>& partial, int dp_shard,
                                       const std::vector<int>* units) {
  double shared_numel = 0, partial_numel = 0;
  int pieces = 1;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (units && std::find(units->begin(), units->end(), specs[i].unit) == units->end()) continue;
    if (shared(specs[i])) shared_numel += double(specs[i].numel()), pieces = pieces_of(specs[i]);
    if (listed(partial, i)) partial_numel += double(specs[i].numel());
  }
  auto shard = [&](double numel) { return std::ceil(numel / dp_shard); };
  return (double(pieces) * shard(shared_numel) + shard(partial_numel)) * sizeof(float);
}

TpGradientSums::TpGradientSums(const std::vector<ParamSpec>& specs,
                               const std::vector<size_t>& partial,
                               const std::vector<std::pair<size_t, Tensor>>& grads) {
  for (const auto& [param, grad] : grads) {
    const ParamSpec& spec = specs.at(param);
    const bool is_shared = shared(spec), is_partial = listed(partial, param);
    if (!is_shared && !is_partial) continue;
    ST_CHECK(grad.dtype() == DType::f32, "{}: a {} gradient", spec.name, dtype_name(grad.dtype()));
    ST_CHECK(!(is_shared && is_partial), "{}: both a shared slice and a partial gradient",
             spec.name);
    if (is_partial) {
      partial_.push_back(grad);
      partial_numel_ += grad.numel();
      continue;
    }
    const int pieces = pieces_of(spec), piece = spec.tp_rank / spec.tp_replicas;
    // Every shared parameter of a model is shared alike (one KV head per rank when n_kv_head
    // < tp), so one slot per piece serves them all.
    ST_CHECK(shared_.empty() || (pieces == pieces_ && piece == piece_),
             "{}: shared over {} pieces, other shared parameters over {}", spec.name, pieces,
             pieces_);
    pieces_ = pieces, piece_ = piece;
    shared_.push_back(grad);
    shared_numel_ += grad.numel();
  }
}

void TpGradientSums::sum(TensorParallel& tp) {
  if (empty()) return;
  if (!buffer_.defined())
    buffer_ = Tensor::empty("tp_gradient_sums", {bytes() / int64_t(sizeof(float))}, DType::f32);
  float* all = buffer_.data<float>();
  float* partial = all + int64_t(pieces_) * shared_numel_;
  std::memset(all, 0, size_t(pieces_) * size_t(shared_numel_) * sizeof(float));
  pack(shared_, all + int64_t(piece_) * shared_numel_);
  pack(partial_, partial);
  tp.all_reduce_sum(buffer_);
  unpack(all + int64_t(piece_) * shared_numel_, shared_);
  unpack(partial, partial_);
}

}  // namespace st
