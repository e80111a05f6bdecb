#include "core/ops/attention_bf16.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "core/ops/avx512_math.hpp"
#include "core/ops/elementwise.hpp"
#include "core/ops/matmul_path.hpp"

namespace st {
namespace {

#define ST_BF16_FN __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma")))
#define ST_BF16 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma"), always_inline)) inline

// Two BF16 values next to each other along a product's reduction, as the one 32-bit word
// vdpbf16ps multiplies lane by lane (low half first).
typedef uint32_t Pair __attribute__((may_alias));

int64_t round_up(int64_t x, int64_t to) {
  return (x + to - 1) / to * to;
}

// One thread's tiles and packed operands: grown on demand, kept for the next call (OpenMP's
// threads persist), 64-byte aligned.
struct alignas(64) CacheLine {
  std::byte bytes[64];
};
struct Workspace {
  std::vector<CacheLine> slots[8];
  template <class T>
  T* get(int slot, int64_t count) {
    std::vector<CacheLine>& v = slots[slot];
    const size_t lines = size_t((count * int64_t(sizeof(T)) + 63) / 64);
    if (v.size() < lines) v.resize(lines);
    return reinterpret_cast<T*>(v.data());
  }
};
thread_local Workspace workspace;

// The register tile: C[MR, 16·NV] = alpha · Σ_p A(m, p) · B(p) (plus C when accumulating), FP32
// sums of BF16 products. A's pair (m, p) is the word a[m·a_row + p·a_pair]; B's row p holds
// 16·NV columns of pairs at b + p·ldb (the "VNNI" layout).
template <int MR, int NV>
ST_BF16 void tile(const Pair* a, int64_t a_row, int64_t a_pair, const Pair* b, int64_t ldb,
                  int64_t pairs, float* c, int64_t ldc, float alpha, bool accumulate) {
  __m512 acc[MR][NV];
#pragma GCC unroll 24
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[m][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    __m512bh bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(b + p * ldb + 16 * v);
#pragma GCC unroll 24
    for (int m = 0; m < MR; ++m) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(int(a[m * a_row + p * a_pair]));
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[m][v] = _mm512_dpbf16_ps(acc[m][v], av, bv[v]);
    }
  }
  const __m512 scale = _mm512_set1_ps(alpha);
#pragma GCC unroll 24
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      float* out = c + m * ldc + 16 * v;
      __m512 r = _mm512_mul_ps(acc[m][v], scale);
      if (accumulate) r = _mm512_add_ps(r, _mm512_loadu_ps(out));
      _mm512_storeu_ps(out, r);
    }
}

// Which part of a causal block's product is known to be zero, and skipped. The block's query
// rows start at r0; a query row sees the keys up to its own position.
enum class Causal {
  none,
  columns,      // C's row m is query r0 + m and its columns are keys: only keys <= r0 + m
  reduce_to,    // C's row m is query r0 + m, the reduction runs over keys: up to r0 + m
  reduce_from,  // C's row m is key m, the reduction runs over the block's rows: from m - r0
};

struct Product {
  const Pair* a;
  int64_t a_row, a_pair;
  const Pair* b;
  int64_t ldb, pairs;
  float* c;
  int64_t ldc;
  float alpha = 1.0f;
  bool accumulate = false;
  Causal causal = Causal::none;
  int64_t r0 = 0;
};

// The tile of exactly `rows` x `vectors` (at most MR x NV), reducing over pairs [p0, p1).
template <int NV, int MR>
ST_BF16 void any_tile(int64_t rows, int64_t vectors, const Product& q, int64_t m0, int64_t n0,
                      int64_t p0, int64_t p1) {
  if constexpr (NV >= 1 && MR >= 1) {
    if (vectors < NV) return any_tile<NV - 1, MR>(rows, vectors, q, m0, n0, p0, p1);
    if (rows < MR) return any_tile<NV, MR - 1>(rows, vectors, q, m0, n0, p0, p1);
    tile<MR, NV>(q.a + m0 * q.a_row + p0 * q.a_pair, q.a_row, q.a_pair, q.b + p0 * q.ldb + n0,
                 q.ldb, p1 - p0, q.c + m0 * q.ldc + n0, q.ldc, q.alpha, q.accumulate);
  }
}

// C[M, N] of the product (N a multiple of 16), tile by tile, skipping what `causal` says is
// zero: columns outermost, so B's block stays in L1 while the row tiles pass.
template <int NV>
ST_BF16_FN void multiply(int64_t M, int64_t N, const Product& q) {
  constexpr int MR = 24 / NV;  // 24 accumulators, NV loads of B and a broadcast of A
  for (int64_t n0 = 0; n0 < N; n0 += 16 * NV)
    for (int64_t m0 = 0; m0 < M; m0 += MR) {
      const int64_t rows = std::min<int64_t>(MR, M - m0);
      int64_t vectors = std::min<int64_t>(NV, (N - n0) / 16), p0 = 0, p1 = q.pairs;
      const int64_t seen = q.r0 + m0 + rows;  // keys the tile's last query row sees
      if (q.causal == Causal::columns) {
        if (n0 >= seen) continue;
        vectors = std::min<int64_t>(vectors, (seen - n0 + 15) / 16);
      } else if (q.causal == Causal::reduce_to) {
        p1 = std::min<int64_t>(p1, (seen + 1) / 2);
      } else if (q.causal == Causal::reduce_from) {
        p0 = std::min<int64_t>(p1, std::max<int64_t>(0, m0 - q.r0) / 2);
      }
      any_tile<NV, MR>(rows, vectors, q, m0, n0, p0, p1);
    }
}

// Sixteen rows of sixteen words transposed in registers: r[i] word j becomes r[j] word i.
ST_BF16 void transpose16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int k = 0; k < 8; ++k) {
    t[2 * k] = _mm512_unpacklo_epi32(r[2 * k], r[2 * k + 1]);      // per 128-bit lane: words 0, 1
    t[2 * k + 1] = _mm512_unpackhi_epi32(r[2 * k], r[2 * k + 1]);  // words 2, 3
  }
  for (int k = 0; k < 4; ++k) {  // u[4k + e], lane L: word 4L + e of rows 4k .. 4k + 3
    u[4 * k] = _mm512_unpacklo_epi64(t[4 * k], t[4 * k + 2]);
    u[4 * k + 1] = _mm512_unpackhi_epi64(t[4 * k], t[4 * k + 2]);
    u[4 * k + 2] = _mm512_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
    u[4 * k + 3] = _mm512_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
  }
  for (int e = 0; e < 4; ++e) {  // a 4 x 4 transpose of 128-bit lanes
    const __m512i x0 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0x44);
    const __m512i x1 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0xee);
    const __m512i x2 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0x44);
    const __m512i x3 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0xee);
    r[e] = _mm512_shuffle_i32x4(x0, x2, 0x88);
    r[4 + e] = _mm512_shuffle_i32x4(x0, x2, 0xdd);
    r[8 + e] = _mm512_shuffle_i32x4(x1, x3, 0x88);
    r[12 + e] = _mm512_shuffle_i32x4(x1, x3, 0xdd);
  }
}

// dst[p·ld + i] = pair p of row i (hs BF16 at src + i·stride) for i < rows; zeros for
// rows <= i < padded (a multiple of 16): the transpose that lets a product reduce over the
// head dimension. hs is a multiple of 32.
ST_BF16_FN void pack_pairs_by_column(Pair* dst, int64_t ld, const bf16* src, int64_t stride,
                                     int64_t rows, int64_t padded, int64_t hs) {
  for (int64_t i = 0; i < padded; i += 16)
    for (int64_t p = 0; p < hs / 2; p += 16) {
      __m512i r[16];
      for (int k = 0; k < 16; ++k)
        r[k] = i + k < rows ? _mm512_loadu_si512(src + (i + k) * stride + 2 * p)
                            : _mm512_setzero_si512();
      transpose16(r);
      for (int k = 0; k < 16; ++k) _mm512_storeu_si512(dst + (p + k) * ld + i, r[k]);
    }
}

// dst[p·hs + d] = (row 2p's d, row 2p+1's d) for rows of hs BF16 at src + i·stride: the layout
// that lets a product reduce over rows. `rows` is even.
ST_BF16_FN void pack_row_pairs(Pair* dst, const bf16* src, int64_t stride, int64_t rows,
                               int64_t hs) {
  for (int64_t p = 0; p < rows / 2; ++p) {
    const bf16* r0 = src + 2 * p * stride;
    for (int64_t d = 0; d < hs; d += 16) {
      const __m512i lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)(r0 + d)));
      const __m512i hi =
          _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)(r0 + stride + d)));
      _mm512_storeu_si512(dst + p * hs + d, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
    }
  }
}

// The same from FP32 rows, each value rounded to BF16 (f32_to_bf16's rule); the rounded rows
// also row-major into `rounded` [rows, hs].
ST_BF16_FN void pack_row_pairs_rounded(Pair* dst, bf16* rounded, const float* src, int64_t stride,
                                       int64_t rows, int64_t hs) {
  for (int64_t p = 0; p < rows / 2; ++p) {
    const float* r0 = src + 2 * p * stride;
    for (int64_t d = 0; d < hs; d += 16) {
      const __m512i lo = avx512::bf16_bits16(_mm512_loadu_ps(r0 + d));
      const __m512i hi = avx512::bf16_bits16(_mm512_loadu_ps(r0 + stride + d));
      _mm512_storeu_si512(dst + p * hs + d, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
      _mm256_storeu_si256((__m256i*)(rounded + 2 * p * hs + d), _mm512_cvtepi32_epi16(lo));
      _mm256_storeu_si256((__m256i*)(rounded + (2 * p + 1) * hs + d), _mm512_cvtepi32_epi16(hi));
    }
  }
}

// Lanes [0, count) of sixteen (none when count <= 0).
__mmask16 first(int64_t count) {
  return count >= 16 ? __mmask16(0xffff) : count <= 0 ? 0 : __mmask16((1u << count) - 1u);
}

// One query row: the scores e[0, visible) become their softmax (FP32 statistics, the
// exponentials kept in e), written to p[0, visible) in BF16 and zeros to p[visible, n).
ST_BF16_FN void softmax_row(float* e, bf16* p, int64_t visible, int64_t n) {
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int64_t k = 0; k < visible; k += 16)
    mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(mx, first(visible - k), e + k));
  const __m512 row_max = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  __m512 sum = _mm512_setzero_ps();
  for (int64_t k = 0; k < visible; k += 16) {
    const __mmask16 m = first(visible - k);
    const __m512 x = avx512::exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, e + k), row_max));
    _mm512_mask_storeu_ps(e + k, m, x);
    sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(m, x));
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
  for (int64_t k = 0; k < n; k += 16) {
    const __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(first(visible - k), e + k), inv);
    _mm256_mask_storeu_epi16(p + k, first(n - k), avx512::bf16_pack16(x));
  }
}

// Where things are in the packed [B, T, W] qkv (and the [B, T, H·hs] head outputs).
struct Layout {
  const AttentionShape& s;
  int64_t T = s.T, W = s.qkv_width(), hs = s.head_size, H = s.H, KV = s.KV(), C = s.C();
  int64_t padded = round_up(T, 64);  // keys, rounded up to a whole column tile
  int64_t q_col(int64_t h) const { return h * hs; }
  int64_t k_col(int64_t g) const { return (H + g) * hs; }
  int64_t v_col(int64_t g) const { return (H + KV + g) * hs; }
  int64_t probs_row(int64_t b, int64_t h, int64_t t) const { return ((b * H + h) * T + t) * T; }
  float alpha() const { return 1.0f / std::sqrt(float(hs)); }
};

// Every (batch, kv head) pair once, over the OpenMP threads; each owns its kv head's gradient.
template <class F>
void for_each_kv_head(const AttentionShape& s, F&& f) {
  const int64_t pairs = s.B * s.KV();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < pairs; ++i) f(i / s.KV(), i % s.KV());
}

// FP32 rows [rows, hs] at src (pitch hs) to BF16 rows at dst (pitch ld).
ST_BF16_FN void store_rows_bf16(bf16* dst, int64_t ld, const float* src, int64_t rows, int64_t hs) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t d = 0; d < hs; d += 16)
      avx512::store16(dst + i * ld + d, _mm512_loadu_ps(src + i * hs + d));
}

// Query heads g·group .. of batch b: their probabilities, block by block.
ST_BF16_FN void probs_forward_kv_head(const bf16* qkv, bf16* probs, const AttentionShape& s,
                                      int64_t b, int64_t g) {
  const Layout L{s};
  const bf16* x = qkv + b * L.T * L.W;
  Pair* keys = workspace.get<Pair>(0, L.hs / 2 * L.padded);  // kᵀ [hs/2, padded] pairs
  float* scores = workspace.get<float>(1, s.block * L.padded);
  pack_pairs_by_column(keys, L.padded, x + L.k_col(g), L.W, L.T, L.padded, L.hs);
  for (int64_t h = g * s.group(); h < (g + 1) * s.group(); ++h)
    for_each_query_block(s, [&](int64_t r0, int64_t rows) {
      const int64_t n = r0 + rows;  // the keys the block sees
      // S = alpha·Q·Kᵀ over the block's keys, then each row's softmax.
      multiply<4>(rows, round_up(n, 64),
                  {.a = reinterpret_cast<const Pair*>(x + r0 * L.W + L.q_col(h)),
                   .a_row = L.W / 2,
                   .a_pair = 1,
                   .b = keys,
                   .ldb = L.padded,
                   .pairs = L.hs / 2,
                   .c = scores,
                   .ldc = L.padded,
                   .alpha = L.alpha(),
                   .causal = Causal::columns,
                   .r0 = r0});
      for (int64_t i = 0; i < rows; ++i)
        softmax_row(scores + i * L.padded, probs + L.probs_row(b, h, r0 + i), r0 + i + 1, n);
    });
}

// Query heads g·group .. of batch b: out = P·V, block by block.
template <int NV>
ST_BF16_FN void values_forward_kv_head(bf16* out, const bf16* qkv, const bf16* probs,
                                       const AttentionShape& s, int64_t b, int64_t g) {
  const Layout L{s};
  const bf16* x = qkv + b * L.T * L.W;
  Pair* values = workspace.get<Pair>(0, L.T / 2 * L.hs);  // v by row pairs [T/2, hs]
  float* y = workspace.get<float>(1, s.block * L.hs);
  pack_row_pairs(values, x + L.v_col(g), L.W, L.T, L.hs);
  for (int64_t h = g * s.group(); h < (g + 1) * s.group(); ++h)
    for_each_query_block(s, [&](int64_t r0, int64_t rows) {
      const int64_t n = r0 + rows;  // the keys the block sees
      multiply<NV>(rows, L.hs,
                   {.a = reinterpret_cast<const Pair*>(probs + L.probs_row(b, h, r0)),
                    .a_row = L.T / 2,
                    .a_pair = 1,
                    .b = values,
                    .ldb = L.hs,
                    .pairs = n / 2,
                    .c = y,
                    .ldc = L.hs,
                    .causal = Causal::reduce_to,
                    .r0 = r0});
      store_rows_bf16(out + (b * L.T + r0) * L.C + L.q_col(h), L.C, y, rows, L.hs);
    });
}

// A block's softmax backward, two rows at a time: dS = P ⊙ (dP − Σ P·dP) over its n keys (P is
// zero past each row's diagonal, where dP was not computed: read as zero), rounded to BF16
// row-major (ds, for dQ) and by row pairs (ds_pairs, for dK), and P by row pairs (p_pairs, for dV).
// Row pitch `ld` in all four.
ST_BF16_FN void softmax_backward_block(bf16* ds, Pair* ds_pairs, Pair* p_pairs, const float* dp,
                                       const bf16* p, int64_t p_ld, int64_t r0, int64_t rows,
                                       int64_t n, int64_t ld) {
  for (int64_t i = 0; i < rows; i += 2) {
    const bf16* p_row[2] = {p + i * p_ld, p + (i + 1) * p_ld};
    const float* dp_row[2] = {dp + i * ld, dp + (i + 1) * ld};
    const int64_t visible[2] = {r0 + i + 1, r0 + i + 2};  // dP is computed only for these keys
    __m512 dot[2];
    for (int r = 0; r < 2; ++r) {
      __m512 acc = _mm512_setzero_ps();
      for (int64_t k = 0; k < visible[r]; k += 16) {
        const __mmask16 m = first(visible[r] - k);
        const __m512 pv = _mm512_castsi512_ps(_mm512_slli_epi32(
            _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p_row[r] + k)), 16));
        acc = _mm512_fmadd_ps(pv, _mm512_maskz_loadu_ps(m, dp_row[r] + k), acc);
      }
      dot[r] = _mm512_set1_ps(_mm512_reduce_add_ps(acc));
    }
    for (int64_t k = 0; k < n; k += 16) {
      const __mmask16 m = first(n - k);
      __m512i p_bits[2], ds_bits[2];
      for (int r = 0; r < 2; ++r) {
        p_bits[r] = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p_row[r] + k));
        const __m512 pv = _mm512_castsi512_ps(_mm512_slli_epi32(p_bits[r], 16));
        const __m512 g =
            _mm512_sub_ps(_mm512_maskz_loadu_ps(first(visible[r] - k), dp_row[r] + k), dot[r]);
        ds_bits[r] = avx512::bf16_bits16(_mm512_mul_ps(pv, g));
        _mm256_mask_storeu_epi16(ds + (i + r) * ld + k, m, _mm512_cvtepi32_epi16(ds_bits[r]));
      }
      Pair* at = ds_pairs + i / 2 * ld + k;
      _mm512_mask_storeu_epi32(at, m,
                               _mm512_or_si512(ds_bits[0], _mm512_slli_epi32(ds_bits[1], 16)));
      at = p_pairs + i / 2 * ld + k;
      _mm512_mask_storeu_epi32(at, m, _mm512_or_si512(p_bits[0], _mm512_slli_epi32(p_bits[1], 16)));
    }
  }
}

// Batch b's kv head g: its query heads' dQ, and its own dK and dV summed over them.
template <int NV>
ST_BF16_FN void backward_kv_head(float* d_qkv, const float* d_out, const bf16* qkv,
                                 const bf16* probs, const AttentionShape& s, int64_t b, int64_t g) {
  const Layout L{s};
  const int64_t hs = L.hs, padded = L.padded, block = s.block;
  const bf16* x = qkv + b * L.T * L.W;
  float* dx = d_qkv + b * L.T * L.W;
  Pair* values_t = workspace.get<Pair>(0, hs / 2 * padded);  // vᵀ [hs/2, padded] pairs
  Pair* keys = workspace.get<Pair>(1, L.T / 2 * hs);         // k by row pairs [T/2, hs]
  float* dp = workspace.get<float>(2, block * padded);       // dP [block, padded]
  bf16* ds = workspace.get<bf16>(3, block * padded);         // dS [block, padded]
  Pair* ds_pairs = workspace.get<Pair>(4, block / 2 * padded);
  Pair* p_pairs = workspace.get<Pair>(5, block / 2 * padded);
  bf16* dy = workspace.get<bf16>(6, block * hs);        // dY rounded [block, hs]
  Pair* dy_pairs = workspace.get<Pair>(7, block * hs);  // dY, then q, by row pairs
  Pair* q_pairs = dy_pairs + block / 2 * hs;
  pack_pairs_by_column(values_t, padded, x + L.v_col(g), L.W, L.T, padded, hs);
  pack_row_pairs(keys, x + L.k_col(g), L.W, L.T, hs);
  const int64_t first_head = g * s.group();
  for (int64_t h = first_head; h < first_head + s.group(); ++h)
    for_each_query_block(s, [&](int64_t r0, int64_t rows) {
      const int64_t n = r0 + rows;  // the keys the block sees
      pack_row_pairs_rounded(dy_pairs, dy, d_out + (b * L.T + r0) * L.C + L.q_col(h), L.C, rows,
                             hs);
      pack_row_pairs(q_pairs, x + r0 * L.W + L.q_col(h), L.W, rows, hs);
      // dP = dY·Vᵀ over the block's keys, then dS.
      multiply<4>(rows, round_up(n, 64),
                  {.a = reinterpret_cast<const Pair*>(dy),
                   .a_row = hs / 2,
                   .a_pair = 1,
                   .b = values_t,
                   .ldb = padded,
                   .pairs = hs / 2,
                   .c = dp,
                   .ldc = padded,
                   .causal = Causal::columns,
                   .r0 = r0});
      softmax_backward_block(ds, ds_pairs, p_pairs, dp, probs + L.probs_row(b, h, r0), L.T, r0,
                             rows, n, padded);
      // dQ = alpha·dS·K (a row's keys are all in its block).
      multiply<NV>(rows, hs,
                   {.a = reinterpret_cast<const Pair*>(ds),
                    .a_row = padded / 2,
                    .a_pair = 1,
                    .b = keys,
                    .ldb = hs,
                    .pairs = n / 2,
                    .c = dx + r0 * L.W + L.q_col(h),
                    .ldc = L.W,
                    .alpha = L.alpha(),
                    .causal = Causal::reduce_to,
                    .r0 = r0});
      // dK += alpha·dSᵀ·Q, dV += Pᵀ·dY: keys x head size, summed over the block's rows. Keys
      // before the block were written by earlier blocks and are added to; the block's own keys
      // [r0, n) are seen here first (for the group's first head), so they are written, which
      // spares zeroing dK and dV beforehand.
      const auto add_over_rows = [&](const Pair* a, const Pair* b, float* c, float alpha) {
        const Product earlier{.a = a,
                              .a_row = 1,
                              .a_pair = padded,
                              .b = b,
                              .ldb = hs,
                              .pairs = rows / 2,
                              .c = c,
                              .ldc = L.W,
                              .alpha = alpha,
                              .accumulate = true};
        multiply<NV>(r0, hs, earlier);
        Product own = earlier;  // key r0 + m is C's row m; rows before it see it as zero
        own.a += r0;
        own.c += r0 * L.W;
        own.accumulate = h != first_head;
        own.causal = Causal::reduce_from;
        multiply<NV>(rows, hs, own);
      };
      add_over_rows(ds_pairs, q_pairs, dx + L.k_col(g), L.alpha());
      add_over_rows(p_pairs, dy_pairs, dx + L.v_col(g), 1.0f);
    });
}

// The kernels for head size 16·NV.
template <class F>
void with_head_vectors(int64_t hs, F&& f) {
  switch (hs) {
    case 32:
      return f.template operator()<2>();
    case 64:
      return f.template operator()<4>();
    case 128:
      return f.template operator()<8>();
  }
  fail("attention_bf16: head size {} has no kernel", hs);
}

}  // namespace

bool attention_bf16_kernels_run(const AttentionShape& s, DType dtype) {
  const CpuFeatures& f = cpu_features();
  return dtype == DType::bf16 && f.avx512_bf16 && f.avx512bw && f.avx512vl &&
         elementwise_tier() == VectorTier::avx512 && !packed_gemm_runs(DType::bf16) &&
         (s.head_size == 32 || s.head_size == 64 || s.head_size == 128) && s.T % 2 == 0 &&
         s.block % 2 == 0;
}

void attention_probs_forward_bf16(const bf16* qkv, bf16* probs, const AttentionShape& s) {
  for_each_kv_head(s, [&](int64_t b, int64_t g) { probs_forward_kv_head(qkv, probs, s, b, g); });
}

void attention_values_forward_bf16(bf16* out, const bf16* qkv, const bf16* probs,
                                   const AttentionShape& s) {
  with_head_vectors(s.head_size, [&]<int NV>() {
    for_each_kv_head(
        s, [&](int64_t b, int64_t g) { values_forward_kv_head<NV>(out, qkv, probs, s, b, g); });
  });
}

void attention_backward_bf16(float* d_qkv, const float* d_out, const bf16* qkv, const bf16* probs,
                             const AttentionShape& s) {
  with_head_vectors(s.head_size, [&]<int NV>() {
    for_each_kv_head(
        s, [&](int64_t b, int64_t g) { backward_kv_head<NV>(d_qkv, d_out, qkv, probs, s, b, g); });
  });
}

}  // namespace st
