#include "core/ops/matmul.hpp"

#include <fmt/format.h>

#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/error.hpp"
#include "core/op_profile.hpp"
#include "core/ops/matmul_path.hpp"
#include "core/ops/packed_gemm.hpp"

namespace st {
namespace {

using dnnl::memory;

memory::data_type dnnl_type(DType t) {
  switch (t) {
    case DType::f32:
      return memory::data_type::f32;
    case DType::bf16:
      return memory::data_type::bf16;
    case DType::i32:
    case DType::f64:
    case DType::i64:
    case DType::u64:
    case DType::u8:
      break;
  }
  fail("matmul: {} operands are not supported", dtype_name(t));
}

memory::desc describe(GemmBatch batch, const MatView& m) {
  if (batch.outer > 1)
    return memory::desc({batch.outer, batch.inner, m.rows, m.cols}, dnnl_type(m.dtype),
                        {m.outer_stride, m.batch_stride, m.row_stride, m.col_stride});
  if (batch.inner == 1)
    return memory::desc({m.rows, m.cols}, dnnl_type(m.dtype), {m.row_stride, m.col_stride});
  return memory::desc({batch.inner, m.rows, m.cols}, dnnl_type(m.dtype),
                      {m.batch_stride, m.row_stride, m.col_stride});
}

struct Key {
  GemmBatch batch;
  MatView a, b, c;
  bool bias;
  DType bias_dtype;
  float alpha;
  bool accumulate;

  auto tie() const {
    auto shape = [](const MatView& m) {
      return std::make_tuple(int(m.dtype), m.rows, m.cols, m.row_stride, m.col_stride,
                             m.batch_stride, m.outer_stride);
    };
    return std::tuple_cat(
        std::make_tuple(batch.outer, batch.inner, bias, int(bias_dtype), alpha, accumulate),
        shape(a), shape(b), shape(c));
  }
  bool operator==(const Key& o) const { return tie() == o.tie(); }
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = 1469598103934665603ull;
    std::apply(
        [&](const auto&... field) {
          ((h = (h ^ std::hash<std::decay_t<decltype(field)>>{}(field)) * 1099511628211ull), ...);
        },
        k.tie());
    return h;
  }
};

struct Cached {
  dnnl::matmul primitive;
  memory::desc a, b, c, bias, scratchpad;
};

class Runtime {
 public:
  Runtime() : engine_(dnnl::engine::kind::cpu, 0) {}

  const Cached& get(const Key& key) {
    std::lock_guard lock(mutex_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    Cached entry;
    entry.a = describe(key.batch, key.a);
    entry.b = describe(key.batch, key.b);
    entry.c = describe(key.batch, key.c);
    if (key.bias) {
      ST_CHECK(key.batch.outer == 1, "matmul: a bias with a two-level batch is not supported");
      const bool single = key.batch.inner == 1;
      memory::dims dims = single ? memory::dims{1, key.c.cols} : memory::dims{1, 1, key.c.cols};
      entry.bias = memory::desc(dims, dnnl_type(key.bias_dtype),
                                single ? memory::format_tag::ab : memory::format_tag::abc);
    }
    dnnl::primitive_attr attr;
    // oneDNN's own scratchpad is one buffer for every primitive, unsafe when two threads run
    // matmuls at once (tensor-parallel ranks in one process): each thread passes its own.
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (key.alpha != 1.0f) attr.set_output_scales(0, {key.alpha});
    if (key.accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    try {
      auto desc = key.bias ? dnnl::matmul::desc(entry.a, entry.b, entry.bias, entry.c)
                           : dnnl::matmul::desc(entry.a, entry.b, entry.c);
      dnnl::matmul::primitive_desc pd(desc, attr, engine_);
      entry.primitive = dnnl::matmul(pd);
      entry.scratchpad = pd.scratchpad_desc();
    } catch (const dnnl::error& e) {
      fail("oneDNN could not create a matmul for batch {}x{} [{}x{}]({})·[{}x{}]({}) -> {}: {}",
           key.batch.outer, key.batch.inner, key.a.rows, key.a.cols, dtype_name(key.a.dtype),
           key.b.rows, key.b.cols, dtype_name(key.b.dtype), dtype_name(key.c.dtype), e.what());
    }
    return cache_.emplace(key, std::move(entry)).first->second;
  }

  dnnl::engine& engine() { return engine_; }
  // A stream is not thread-safe (oneDNN's threading contract): each thread that runs matmuls
  // (tensor-parallel ranks in one process, in the tests) has its own; primitives are shared.
  dnnl::stream& stream() {
    thread_local dnnl::stream stream(engine_);
    return stream;
  }

 private:
  dnnl::engine engine_;
  std::mutex mutex_;
  std::unordered_map<Key, Cached, KeyHash> cache_;
};

Runtime& runtime() {
  static Runtime rt;
  return rt;
}

}  // namespace

void gemm(GemmBatch batch, const MatView& a, const MatView& b, const MatView& c,
          const GemmOptions& options) {
  OpScope scope(OpKind::matmul);
  if (a.cols != b.rows || a.rows != c.rows || b.cols != c.cols)
    fail("matmul shapes do not chain: [{}x{}]·[{}x{}] -> [{}x{}]", a.rows, a.cols, b.rows, b.cols,
         c.rows, c.cols);
  if (batch.outer <= 0 || batch.inner <= 0 || a.rows == 0 || b.cols == 0) return;
  // oneDNN's output scale multiplies the bias too, the packed GEMM's does not: no caller needs
  // both, so neither behaviour is promised.
  ST_CHECK(!options.bias || options.alpha == 1.0f,
           "matmul: alpha scales the product alone, so it cannot come with a bias");
  const bool any_bf16 = a.dtype == DType::bf16 || b.dtype == DType::bf16 ||
                        c.dtype == DType::bf16 ||
                        (options.bias && options.bias_dtype == DType::bf16);
  // Widened BF16 always runs on the packed GEMM: its packing widens for free, where oneDNN
  // would need FP32 copies of both operands.
  if (packed_gemm_runs(any_bf16 ? DType::bf16 : DType::f32))
    return packed_gemm(batch, a, b, c, options);
  Key key{batch,
          a,
          b,
          c,
          options.bias != nullptr,
          options.bias_dtype,
          options.alpha,
          options.accumulate};
  auto& rt = runtime();
  const Cached& entry = rt.get(key);
  auto wrap = [&](const memory::desc& d, const void* p) {
    return memory(d, rt.engine(), const_cast<void*>(p));
  };
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, wrap(entry.a, a.data)},
                                       {DNNL_ARG_WEIGHTS, wrap(entry.b, b.data)},
                                       {DNNL_ARG_DST, wrap(entry.c, c.data)}};
  if (options.bias) args.emplace(DNNL_ARG_BIAS, wrap(entry.bias, options.bias));
  if (const size_t bytes = entry.scratchpad.get_size(); bytes > 0) {
    thread_local std::vector<uint8_t> scratchpad;
    if (scratchpad.size() < bytes) scratchpad.resize(bytes);
    args.emplace(DNNL_ARG_SCRATCHPAD, wrap(entry.scratchpad, scratchpad.data()));
  }
  entry.primitive.execute(rt.stream(), args);
  rt.stream().wait();
}

namespace {

std::string onednn_matmul_impl(DType dtype) {
  auto& rt = runtime();
  const int64_t n = 2048;
  MatView m{nullptr, dtype, n, n, n, 1, n * n};
  MatView out{nullptr, DType::f32, n, n, n, 1, n * n};
  try {
    dnnl::matmul::desc desc(describe({}, m), describe({}, m), describe({}, out));
    dnnl::matmul::primitive_desc pd(desc, rt.engine());
    return pd.impl_info_str();
  } catch (const dnnl::error& e) {
    return fmt::format("unavailable ({})", e.what());
  }
}

}  // namespace

std::string onednn_bf16_matmul_impl() {
  return onednn_matmul_impl(DType::bf16);
}

std::string onednn_fp32_matmul_impl() {
  return onednn_matmul_impl(DType::f32);
}

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return fmt::format("{}.{}.{}", v->major, v->minor, v->patch);
}

}  // namespace st
