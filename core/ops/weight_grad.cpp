#include "core/ops/weight_grad.hpp"

#include <cstring>

#include "core/error.hpp"
#include "core/op_profile.hpp"

namespace st {

namespace {

thread_local DeferredWeightGrads* active = nullptr;

// `v`'s elements copied into `into`, and a view of the copy with the same values: a view whose
// columns are contiguous copies row by row, one whose rows are (a transpose) as its transpose.
MatView copy_view(const MatView& v, Tensor& into, const char* name) {
  ST_CHECK(v.col_stride == 1 || v.row_stride == 1, "weight_grad_gemm: a view strided both ways");
  const bool transposed = v.col_stride != 1;
  const MatView m = transposed ? v.t() : v;  // contiguous columns
  const size_t row_bytes = size_t(m.cols) * dtype_size(m.dtype);
  into = Tensor::empty(name, {m.rows * m.cols}, m.dtype);
  OpScope scope(OpKind::cast_copy);
  for (int64_t i = 0; i < m.rows; ++i)
    std::memcpy(static_cast<char*>(into.raw()) + size_t(i) * row_bytes,
                static_cast<const char*>(m.data) + size_t(i * m.row_stride) * dtype_size(m.dtype),
                row_bytes);
  const MatView copy = MatView::row_major(into.raw(), m.dtype, m.rows, m.cols);
  return transposed ? copy.t() : copy;
}

void accumulate(const MatView& a, const MatView& b, const MatView& c) {
  GemmOptions options;
  options.accumulate = true;
  gemm(1, a, b, c, options);
}

}  // namespace

DeferWeightGrads::DeferWeightGrads(DeferredWeightGrads& into) : outer_(active) {
  active = &into;
}

DeferWeightGrads::~DeferWeightGrads() {
  active = outer_;
}

void weight_grad_gemm(const MatView& a, const MatView& b, const MatView& c) {
  if (!active) return accumulate(a, b, c);
  DeferredWeightGrads::Item item;
  item.a = copy_view(a, item.a_copy, "deferred_weight_grad.a");
  item.b = copy_view(b, item.b_copy, "deferred_weight_grad.b");
  item.c = c;
  active->bytes_ += int64_t(item.a_copy.nbytes() + item.b_copy.nbytes());
  active->items_.push_back(std::move(item));
}

void DeferredWeightGrads::run() {
  for (const Item& item : items_) accumulate(item.a, item.b, item.c);
  items_.clear();
  bytes_ = 0;
}

}  // namespace st
