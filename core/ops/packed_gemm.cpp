#include "core/ops/packed_gemm.hpp"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/ops/avx2_math.hpp"
#include "core/ops/elementwise.hpp"

namespace st {
namespace {

// Register block of the micro-kernel: 6 rows x 16 columns = 12 AVX2 accumulators.
constexpr int64_t kMR = 6, kNR = 16;
// Cache blocks (AVX2 CPUs: a 6x16 kernel, 32 KiB L1, 512 KiB-1 MiB L2): a KC x NR sliver of B
// stays in L1 while an MC x KC block of A sits in L2; the KC x NC panel of B in L3.
constexpr int64_t kKC = 256, kMC = 168, kNC = 4080;
// A BF16 (or strided) output is written once, from the sum over all of K, so K is not blocked
// there; past this K the product goes through an FP32 scratch output instead.
constexpr int64_t kMaxUnblockedK = 4096;

inline float widen(float x) {
  return x;
}
inline float widen(bf16 x) {
  return bf16_to_f32(x);
}

// One strip of kMR = 6 rows with unit column stride, eight k at a time: the 6 x 8 block is
// widened and transposed in registers, and each k's 6 values are stored as 8 floats that the
// next k overwrites (so the strip's buffer needs kPackSlack floats past its end).
constexpr int64_t kPackSlack = 8;
template <class T>
ST_AVX2_FN void pack_a_strip_avx2(float* d, const T* src, int64_t rs, int64_t kc) {
  static_assert(kMR == 6);
  int64_t k = 0;
  const __m256 zero = _mm256_setzero_ps();
  for (; k + 8 <= kc; k += 8) {
    const __m256 r0 = avx2::load8(src + k), r1 = avx2::load8(src + rs + k),
                 r2 = avx2::load8(src + 2 * rs + k), r3 = avx2::load8(src + 3 * rs + k),
                 r4 = avx2::load8(src + 4 * rs + k), r5 = avx2::load8(src + 5 * rs + k);
    const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    // u_j: rows 0-3 of k + j (low half) and k + j + 4 (high half); v_j: rows 4-5 likewise.
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 v0 = _mm256_shuffle_ps(t4, zero, 0x44), v1 = _mm256_shuffle_ps(t4, zero, 0xEE);
    const __m256 v2 = _mm256_shuffle_ps(t5, zero, 0x44), v3 = _mm256_shuffle_ps(t5, zero, 0xEE);
    float* o = d + k * kMR;
    _mm256_storeu_ps(o + 0 * kMR, _mm256_permute2f128_ps(u0, v0, 0x20));
    _mm256_storeu_ps(o + 1 * kMR, _mm256_permute2f128_ps(u1, v1, 0x20));
    _mm256_storeu_ps(o + 2 * kMR, _mm256_permute2f128_ps(u2, v2, 0x20));
    _mm256_storeu_ps(o + 3 * kMR, _mm256_permute2f128_ps(u3, v3, 0x20));
    _mm256_storeu_ps(o + 4 * kMR, _mm256_permute2f128_ps(u0, v0, 0x31));
    _mm256_storeu_ps(o + 5 * kMR, _mm256_permute2f128_ps(u1, v1, 0x31));
    _mm256_storeu_ps(o + 6 * kMR, _mm256_permute2f128_ps(u2, v2, 0x31));
    _mm256_storeu_ps(o + 7 * kMR, _mm256_permute2f128_ps(u3, v3, 0x31));
  }
  for (; k < kc; ++k)
    for (int64_t r = 0; r < kMR; ++r) d[k * kMR + r] = widen(src[r * rs + k]);
}

// dst[strip][k][r] for strips of kMR rows of the mc x kc block at `a` (zero-padded to kMR).
template <class T>
void pack_a(float* __restrict dst, const T* __restrict a, int64_t rs, int64_t cs, int64_t mc,
            int64_t kc, bool avx2) {
  for (int64_t s = 0; s < mc; s += kMR) {
    const int64_t rows = std::min(kMR, mc - s);
    float* d = dst + s * kc;
    const T* src = a + s * rs;
    if (rows == kMR && cs == 1 && avx2) {
      pack_a_strip_avx2(d, src, rs, kc);
    } else if (rows == kMR && cs == 1) {
      for (int64_t r = 0; r < kMR; ++r)
        for (int64_t k = 0; k < kc; ++k) d[k * kMR + r] = widen(src[r * rs + k]);
    } else if (rows == kMR && rs == 1) {
      for (int64_t k = 0; k < kc; ++k)
#pragma omp simd
        for (int64_t r = 0; r < kMR; ++r) d[k * kMR + r] = widen(src[k * cs + r]);
    } else {
      for (int64_t k = 0; k < kc; ++k)
        for (int64_t r = 0; r < kMR; ++r)
          d[k * kMR + r] = r < rows ? widen(src[r * rs + k * cs]) : 0.f;
    }
  }
}

// dst[strip][k][c] for strips of kNR columns of the kc x nc block at `b` (zero-padded to kNR).
template <class T>
void pack_b(float* __restrict dst, const T* __restrict b, int64_t rs, int64_t cs, int64_t kc,
            int64_t nc) {
  for (int64_t s = 0; s < nc; s += kNR) {
    const int64_t cols = std::min(kNR, nc - s);
    float* d = dst + s * kc;
    const T* src = b + s * cs;
    if (cols == kNR && cs == 1) {
      for (int64_t k = 0; k < kc; ++k)
#pragma omp simd
        for (int64_t c = 0; c < kNR; ++c) d[k * kNR + c] = widen(src[k * rs + c]);
    } else if (cols == kNR && rs == 1) {
      // Column by column: each source column is contiguous in k.
      for (int64_t c = 0; c < kNR; ++c)
        for (int64_t k = 0; k < kc; ++k) d[k * kNR + c] = widen(src[c * cs + k]);
    } else {
      for (int64_t k = 0; k < kc; ++k)
        for (int64_t c = 0; c < kNR; ++c)
          d[k * kNR + c] = c < cols ? widen(src[k * rs + c * cs]) : 0.f;
    }
  }
}

// c[r][j] = alpha * sum_k a[k][r] b[k][j] (+ bias[j]) (+ c[r][j] when add), r < 6, j < 16.
using MicroKernel = void (*)(int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                             float alpha, bool add, const float* bias);

void micro_portable(int64_t kc, const float* __restrict a, const float* __restrict b,
                    float* __restrict c, int64_t ldc, float alpha, bool add,
                    const float* __restrict bias) {
  float acc[kMR][kNR] = {};
  for (int64_t k = 0; k < kc; ++k, a += kMR, b += kNR)
    for (int64_t r = 0; r < kMR; ++r)
#pragma omp simd
      for (int64_t j = 0; j < kNR; ++j) acc[r][j] += a[r] * b[j];
  for (int64_t r = 0; r < kMR; ++r)
    for (int64_t j = 0; j < kNR; ++j) {
      float v = alpha * acc[r][j];
      if (bias) v += bias[j];
      if (add) v += c[r * ldc + j];
      c[r * ldc + j] = v;
    }
}

// A row of micro_avx2's tile into C: alpha * sum + bias (+ C). A function, not a lambda: GCC does
// not give a lambda its enclosing function's target, so a build without -march
// (SHARDTRAIN_PORTABLE) could not inline the intrinsics into one.
__attribute__((target("avx2,fma"), always_inline)) inline void store_tile_row_avx2(
    float* row, __m256 v0, __m256 v1, __m256 va, __m256 bias0, __m256 bias1, bool add) {
  v0 = _mm256_fmadd_ps(v0, va, bias0);
  v1 = _mm256_fmadd_ps(v1, va, bias1);
  if (add) {
    v0 = _mm256_add_ps(v0, _mm256_loadu_ps(row));
    v1 = _mm256_add_ps(v1, _mm256_loadu_ps(row + 8));
  }
  _mm256_storeu_ps(row, v0);
  _mm256_storeu_ps(row + 8, v1);
}

__attribute__((target("avx2,fma"))) void micro_avx2(int64_t kc, const float* __restrict a,
                                                    const float* __restrict b, float* __restrict c,
                                                    int64_t ldc, float alpha, bool add,
                                                    const float* __restrict bias) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; ++k, a += kMR, b += kNR) {
    const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
    __m256 x = _mm256_broadcast_ss(a + 0);
    c00 = _mm256_fmadd_ps(x, b0, c00);
    c01 = _mm256_fmadd_ps(x, b1, c01);
    x = _mm256_broadcast_ss(a + 1);
    c10 = _mm256_fmadd_ps(x, b0, c10);
    c11 = _mm256_fmadd_ps(x, b1, c11);
    x = _mm256_broadcast_ss(a + 2);
    c20 = _mm256_fmadd_ps(x, b0, c20);
    c21 = _mm256_fmadd_ps(x, b1, c21);
    x = _mm256_broadcast_ss(a + 3);
    c30 = _mm256_fmadd_ps(x, b0, c30);
    c31 = _mm256_fmadd_ps(x, b1, c31);
    x = _mm256_broadcast_ss(a + 4);
    c40 = _mm256_fmadd_ps(x, b0, c40);
    c41 = _mm256_fmadd_ps(x, b1, c41);
    x = _mm256_broadcast_ss(a + 5);
    c50 = _mm256_fmadd_ps(x, b0, c50);
    c51 = _mm256_fmadd_ps(x, b1, c51);
  }
  const __m256 va = _mm256_set1_ps(alpha);
  const __m256 bias0 = bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps();
  const __m256 bias1 = bias ? _mm256_loadu_ps(bias + 8) : _mm256_setzero_ps();
  store_tile_row_avx2(c, c00, c01, va, bias0, bias1, add);
  store_tile_row_avx2(c + ldc, c10, c11, va, bias0, bias1, add);
  store_tile_row_avx2(c + 2 * ldc, c20, c21, va, bias0, bias1, add);
  store_tile_row_avx2(c + 3 * ldc, c30, c31, va, bias0, bias1, add);
  store_tile_row_avx2(c + 4 * ldc, c40, c41, va, bias0, bias1, add);
  store_tile_row_avx2(c + 5 * ldc, c50, c51, va, bias0, bias1, add);
}

// One full row (kNR columns) of a finished tile into C: alpha * sum (+ bias) (+ C), rounded to
// TC once; the same operations, in the same order, as the scalar store.
template <class TC>
ST_AVX2_FN void store_row_avx2(TC* out, const float* sums, float alpha, const float* bias,
                               bool add) {
  const __m256 va = _mm256_set1_ps(alpha);
  for (int64_t h = 0; h < kNR; h += 8) {
    __m256 v = _mm256_mul_ps(va, _mm256_load_ps(sums + h));
    if (bias) v = _mm256_add_ps(v, _mm256_loadu_ps(bias + h));
    if (add) v = _mm256_add_ps(v, avx2::load8(out + h));
    avx2::store8(out + h, v);
  }
}

std::atomic<bool> force_portable{false};

MicroKernel micro_kernel() {
  const CpuFeatures& f = cpu_features();
  return (f.avx2 && f.fma && !force_portable.load()) ? micro_avx2 : micro_portable;
}

// A 64-byte aligned float buffer that only grows; one per thread and operand.
class PackBuffer {
 public:
  float* get(size_t floats) {
    if (floats > capacity_) {
      const size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
      data_.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
      if (!data_) throw std::bad_alloc();
      capacity_ = floats;
    }
    return data_.get();
  }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data_;
  size_t capacity_ = 0;
};

struct Workspace {
  PackBuffer a, b;
};

Workspace& thread_workspace() {
  thread_local Workspace ws;
  return ws;
}

// One multiplication, typed: TA, TB the inputs, TC the output.
template <class TA, class TB, class TC>
struct Problem {
  GemmBatch batch;
  MatView a, b, c;
  float alpha;
  bool accumulate;
  const float* bias;         // widened, or null
  bool direct = false;       // C is FP32 with unit column stride: the kernel writes it in place
  bool vector_rows = false;  // AVX2 packs A's row strips and stores full tile rows of C
  int64_t kc_block = 0, mc_block = 0, nc_block = 0;
  MicroKernel kernel = nullptr;

  int64_t batches() const { return batch.outer * batch.inner; }
  static int64_t offset(const MatView& m, int64_t inner, int64_t index) {
    return (index / inner) * m.outer_stride + (index % inner) * m.batch_stride;
  }

  // Rows [m0, m1) and columns [n0, n1) of batch `index`'s C.
  void run(int64_t index, int64_t m0, int64_t m1, int64_t n0, int64_t n1, Workspace& ws) const {
    const TA* A = static_cast<const TA*>(a.data) + offset(a, batch.inner, index);
    const TB* B = static_cast<const TB*>(b.data) + offset(b, batch.inner, index);
    TC* C = static_cast<TC*>(const_cast<void*>(c.data)) + offset(c, batch.inner, index);
    const int64_t K = a.cols;
    float* bpack = ws.b.get(size_t(kc_block * ((nc_block + kNR - 1) / kNR * kNR)));
    float* apack = ws.a.get(size_t(kc_block * ((mc_block + kMR - 1) / kMR * kMR) + kPackSlack));
    alignas(64) float tile[kMR * kNR];
    for (int64_t nc0 = n0; nc0 < n1; nc0 += nc_block) {
      const int64_t nc = std::min(nc_block, n1 - nc0);
      for (int64_t kc0 = 0; kc0 < K; kc0 += kc_block) {
        const int64_t kc = std::min(kc_block, K - kc0);
        const bool first = kc0 == 0;
        pack_b(bpack, B + kc0 * b.row_stride + nc0 * b.col_stride, b.row_stride, b.col_stride, kc,
               nc);
        for (int64_t mc0 = m0; mc0 < m1; mc0 += mc_block) {
          const int64_t mc = std::min(mc_block, m1 - mc0);
          pack_a(apack, A + mc0 * a.row_stride + kc0 * a.col_stride, a.row_stride, a.col_stride, mc,
                 kc, vector_rows);
          for (int64_t j = 0; j < nc; j += kNR) {
            const int64_t cols = std::min(kNR, nc - j);
            const float* bias_j = first && bias ? bias + nc0 + j : nullptr;
            const bool add = !first || accumulate;
            for (int64_t i = 0; i < mc; i += kMR) {
              const int64_t rows = std::min(kMR, mc - i);
              const float* ap = apack + i * kc;
              const float* bp = bpack + j * kc;
              TC* cp = C + (mc0 + i) * c.row_stride + (nc0 + j) * c.col_stride;
              if (direct && rows == kMR && cols == kNR) {
                kernel(kc, ap, bp, reinterpret_cast<float*>(cp), c.row_stride, alpha, add, bias_j);
                continue;
              }
              kernel(kc, ap, bp, tile, kNR, 1.0f, false, nullptr);
              if (vector_rows && cols == kNR && c.col_stride == 1) {
                for (int64_t r = 0; r < rows; ++r)
                  store_row_avx2(cp + r * c.row_stride, tile + r * kNR, alpha, bias_j, add);
                continue;
              }
              for (int64_t r = 0; r < rows; ++r)
                for (int64_t q = 0; q < cols; ++q) {
                  TC* out = cp + r * c.row_stride + q * c.col_stride;
                  float v = alpha * tile[r * kNR + q];
                  if (bias_j) v += bias_j[q];
                  if (add) v += to_f32(*out);
                  *out = from_f32<TC>(v);
                }
            }
          }
        }
      }
    }
  }

  void run_all() const {
    const int64_t M = a.rows, N = b.cols, count = batches();
    auto body = [&](int threads, int t) {
      Workspace& ws = thread_workspace();
      if (count >= 2 * threads || threads == 1) {
        for (int64_t index = count * t / threads; index < count * (t + 1) / threads; ++index)
          run(index, 0, M, 0, N, ws);
        return;
      }
      // Few batches: split each one. Along N each thread packs all of A; along M, all of B:
      // split the way that duplicates the smaller operand.
      for (int64_t index = 0; index < count; ++index) {
        if (M < N) {
          const int64_t strips = (N + kNR - 1) / kNR;
          const int64_t s0 = strips * t / threads, s1 = strips * (t + 1) / threads;
          if (s0 < s1) run(index, 0, M, s0 * kNR, std::min(N, s1 * kNR), ws);
        } else {
          const int64_t strips = (M + kMR - 1) / kMR;
          const int64_t s0 = strips * t / threads, s1 = strips * (t + 1) / threads;
          if (s0 < s1) run(index, s0 * kMR, std::min(M, s1 * kMR), 0, N, ws);
        }
      }
    };
    const int64_t flops = 2 * count * M * N * a.cols;
    if (omp_in_parallel() || flops < (int64_t(1) << 18)) return body(1, 0);
#pragma omp parallel
    body(omp_get_num_threads(), omp_get_thread_num());
  }
};

template <class TA, class TB, class TC>
void run_typed(GemmBatch batch, const MatView& a, const MatView& b, const MatView& c,
               const GemmOptions& options, const float* bias) {
  Problem<TA, TB, TC> p{batch, a, b, c, options.alpha, options.accumulate, bias};
  p.direct = std::is_same_v<TC, float> && c.col_stride == 1;
  const int64_t K = a.cols;
  p.kc_block = p.direct ? std::min(K, kKC) : K;
  // Keep the packed blocks about the sizes the cache blocks were chosen for.
  const int64_t scale = std::max<int64_t>(1, (p.kc_block + kKC - 1) / kKC);
  p.mc_block = std::max(kMR, kMC / scale / kMR * kMR);
  p.nc_block = std::max(kNR, kNC / scale / kNR * kNR);
  p.kernel = micro_kernel();
  p.vector_rows = p.kernel == micro_avx2;
  p.run_all();
}

template <class TA, class TB>
void dispatch_c(GemmBatch batch, const MatView& a, const MatView& b, const MatView& c,
                const GemmOptions& options, const float* bias) {
  if (c.dtype == DType::f32) return run_typed<TA, TB, float>(batch, a, b, c, options, bias);
  return run_typed<TA, TB, bf16>(batch, a, b, c, options, bias);
}

template <class TA>
void dispatch_b(GemmBatch batch, const MatView& a, const MatView& b, const MatView& c,
                const GemmOptions& options, const float* bias) {
  if (b.dtype == DType::f32) return dispatch_c<TA, float>(batch, a, b, c, options, bias);
  return dispatch_c<TA, bf16>(batch, a, b, c, options, bias);
}

bool is_float(DType d) {
  return d == DType::f32 || d == DType::bf16;
}

}  // namespace

void packed_gemm(GemmBatch batch, const MatView& a, const MatView& b, const MatView& c,
                 const GemmOptions& options) {
  ST_CHECK(is_float(a.dtype) && is_float(b.dtype) && is_float(c.dtype),
           "packed_gemm: operands must be fp32 or bf16");
  ST_CHECK(!options.bias || batch.outer == 1, "matmul: a bias with a two-level batch");
  const int64_t N = c.cols;
  std::vector<float> bias;
  if (options.bias) {
    bias.resize(size_t(N));
    dispatch_float(options.bias_dtype, [&]<class T>(T) {
      const T* src = static_cast<const T*>(options.bias);
      for (int64_t j = 0; j < N; ++j) bias[size_t(j)] = to_f32(src[j]);
    });
  }
  const bool unblocked = !(c.dtype == DType::f32 && c.col_stride == 1);
  if (a.cols == 0 || (unblocked && a.cols > kMaxUnblockedK)) {
    // A long K into a BF16 or strided output: FP32 sums in a scratch matrix, then one rounding.
    // (K = 0 goes this way too: the output is the bias, plus C when accumulating.)
    std::vector<float> sums(size_t(c.rows * c.cols));
    const int64_t inner = batch.inner;
    for (int64_t index = 0; index < batch.outer * inner; ++index) {
      auto at = [&](const MatView& m) {
        MatView v = m;
        v.data = static_cast<const char*>(m.data) +
                 ((index / inner) * m.outer_stride + (index % inner) * m.batch_stride) *
                     int64_t(dtype_size(m.dtype));
        return v;
      };
      GemmOptions plain;
      plain.alpha = options.alpha;
      if (a.cols > 0)
        packed_gemm({}, at(a), at(b), MatView::row_major(sums.data(), DType::f32, c.rows, c.cols),
                    plain);
      const MatView out = at(c);
      dispatch_float(c.dtype, [&]<class T>(T) {
        T* dst = static_cast<T*>(const_cast<void*>(out.data));
        for (int64_t i = 0; i < c.rows; ++i)
          for (int64_t j = 0; j < c.cols; ++j) {
            T* o = dst + i * out.row_stride + j * out.col_stride;
            float v = sums[size_t(i * c.cols + j)];
            if (options.bias) v += bias[size_t(j)];
            if (options.accumulate) v += to_f32(*o);
            *o = from_f32<T>(v);
          }
      });
    }
    return;
  }
  const float* bias_ptr = options.bias ? bias.data() : nullptr;
  if (a.dtype == DType::f32) return dispatch_b<float>(batch, a, b, c, options, bias_ptr);
  return dispatch_b<bf16>(batch, a, b, c, options, bias_ptr);
}

const char* packed_gemm_kernel_name() {
  return micro_kernel() == micro_avx2 ? "avx2-fma" : "portable";
}

void set_packed_gemm_portable(bool portable) {
  force_portable = portable;
}

size_t packed_gemm_workspace_bytes_per_thread() {
  const size_t a = size_t(kMC + kMR) * size_t(kKC) + size_t(kPackSlack),
               b = size_t(kNC + kNR) * size_t(kKC);
  return (a + b) * sizeof(float);
}

}  // namespace st
