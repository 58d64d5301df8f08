// levanter's small-M products: C (+)= op(A)·op(B) for at most SMALL_M rows of A (decoding's
// matrix–vector products), streaming op(B) once from where it lies, with no packing. At batch 1 a
// product reads every weight once and does two flops per 4 bytes, so it is bound by memory
// bandwidth, and the blocked GEMM's packing of B (a copy of the whole weight matrix per call) and its
// zero-padded 6- or 12-row tiles (most of their work on padding) cost more than the product.
//
// Every element of C is the blocked GEMM's chain of operations exactly (native/gemm-impl.h): per
// KC-deep pass from zero, one FMA per k in k order, the pass's sum stored (the first pass, unless
// accumulating) or added to C in pass order. So a row computed here equals that row computed inside
// a larger product, and the split over threads (by column groups) changes no bit either.
//
// Two layouts of B (rows of A are copied first, whatever their strides):
//  - B rows contiguous (bcs = 1, the [in, out] weights of the affine layers): for a strip of columns,
//    each of B's rows in turn, its strip's floats loaded once and FMA'd into every row's partial
//    sums, which sit in an L1-sized buffer; a strip is a whole row where that fits, so B is read in
//    order from start to end.
//  - B transposed (brs = 1: the tied head reads the token table [V, D] as its [D, V] operand): eight
//    of its rows (eight output columns) at a time, eight floats of each along k per step, transposed in
//    registers so that lane j of vector t holds column j at k + t; each row is read in order.
#include <immintrin.h>
#include <sys/mman.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "gemm-impl.h"
#include "gemm.h"
#include "gemv-bf16.h"
#include "ops.h"
#include "pool.h"

namespace levanter {

namespace {

bool smallMOn = true;  // setSmallM(false): every product on the blocked GEMM (to compare the two)

// Partial sums per thread, SMALL_M rows of at most STRIP floats each (32 KiB): an L1-sized buffer.
constexpr int64_t STRIP_FLOATS = 8192;
// Software prefetch distance along a stream of B, in floats (2 KiB): on this machine's VM one core's read bandwidth
// rose ~20% with it over the hardware prefetchers alone (bench/decode-roofline.ts measures the products).
constexpr int64_t PREFETCH = 512;
inline thread_local float* stripBuffer = nullptr;

bool stripBuf() {
  if (!stripBuffer) stripBuffer = static_cast<float*>(std::aligned_alloc(64, STRIP_FLOATS * sizeof(float)));
  return stripBuffer != nullptr;
}

// The mask of the first n (0–8) lanes.
inline __m256i firstLanes(int64_t n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), idx);
}

// c[j] = add ? c[j] + acc[j] : acc[j], for j < n.
inline void store(float* c, const float* acc, int64_t n, bool add) {
  int64_t j = 0;
  if (add)
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(c + j, _mm256_add_ps(_mm256_loadu_ps(c + j), _mm256_load_ps(acc + j)));
  else
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(c + j, _mm256_load_ps(acc + j));
  for (; j < n; j++) c[j] = add ? c[j] + acc[j] : acc[j];
}

// B rows contiguous: columns [j0, j1) of C for the M rows of A (a: M rows of K floats).
template <int M>
void rowsOfB(const float* a, int64_t K, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t j0, int64_t j1,
             bool accumulate) {
  constexpr int64_t strip = (STRIP_FLOATS / M) & ~int64_t{7};
  float* acc = stripBuffer;
  for (int64_t s0 = j0; s0 < j1; s0 += strip) {
    const int64_t w = j1 - s0 < strip ? j1 - s0 : strip;
    const int64_t w8 = w & ~int64_t{7};
    const __m256i tail = firstLanes(w - w8);
    for (int64_t pc = 0; pc < K; pc += KC) {
      const int64_t kb = K - pc < KC ? K - pc : KC;
      for (int i = 0; i < M; i++) std::memset(acc + i * strip, 0, sizeof(float) * ((w + 7) & ~int64_t{7}));
      for (int64_t k = pc; k < pc + kb; k++) {
        const float* row = b + k * ldb + s0;
        __m256 x[M];
        for (int i = 0; i < M; i++) x[i] = _mm256_set1_ps(a[i * K + k]);
        int64_t j = 0;
        for (; j + 32 <= w8; j += 32) {
          // the strip's next cache lines, PREFETCH floats ahead (into the next row's strip near the end of this one)
          const float* ahead = j + PREFETCH < w ? row + j + PREFETCH : row + ldb + (j + PREFETCH - w);
          _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(ahead) + 64, _MM_HINT_T0);
          const __m256 b0 = _mm256_loadu_ps(row + j), b1 = _mm256_loadu_ps(row + j + 8);
          const __m256 b2 = _mm256_loadu_ps(row + j + 16), b3 = _mm256_loadu_ps(row + j + 24);
          for (int i = 0; i < M; i++) {
            float* p = acc + i * strip + j;
            _mm256_store_ps(p, _mm256_fmadd_ps(x[i], b0, _mm256_load_ps(p)));
            _mm256_store_ps(p + 8, _mm256_fmadd_ps(x[i], b1, _mm256_load_ps(p + 8)));
            _mm256_store_ps(p + 16, _mm256_fmadd_ps(x[i], b2, _mm256_load_ps(p + 16)));
            _mm256_store_ps(p + 24, _mm256_fmadd_ps(x[i], b3, _mm256_load_ps(p + 24)));
          }
        }
        for (; j < w8; j += 8) {
          const __m256 bv = _mm256_loadu_ps(row + j);
          for (int i = 0; i < M; i++) {
            float* p = acc + i * strip + j;
            _mm256_store_ps(p, _mm256_fmadd_ps(x[i], bv, _mm256_load_ps(p)));
          }
        }
        if (w8 < w) {
          const __m256 bv = _mm256_maskload_ps(row + w8, tail);
          for (int i = 0; i < M; i++) {
            float* p = acc + i * strip + w8;
            _mm256_store_ps(p, _mm256_fmadd_ps(x[i], bv, _mm256_load_ps(p)));
          }
        }
      }
      const bool add = accumulate || pc > 0;
      for (int i = 0; i < M; i++) store(c + i * ldc + s0, acc + i * strip, w, add);
    }
  }
}

// Columns 0–7 of the 8×8 block r (row p, eight floats along k): out[t] lane p = r[p][t].
inline void transpose8(const __m256 r[8], __m256 out[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  out[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  out[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  out[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  out[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  out[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  out[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  out[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  out[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// B transposed (op(B)(k, j) = w[j·ldw + k]): columns [j0, j1) of C, 8·G at a time (G groups of eight, so G
// independent FMA chains per row of A keep the FMA latency off the critical path); a block short of 8·G
// columns repeats its last column in the missing lanes and stores only its own.
template <int M, int G>
void columnsOfB(const float* a, int64_t K, const float* w, int64_t ldw, float* c, int64_t ldc, int64_t j0, int64_t j1,
                bool accumulate) {
  alignas(32) float out[8];
  for (int64_t g = j0; g < j1; g += 8 * G) {
    const int64_t n = j1 - g < 8 * G ? j1 - g : 8 * G;
    const float* r[G][8];
    for (int q = 0; q < 8 * G; q++) r[q / 8][q % 8] = w + (g + (q < n ? q : n - 1)) * ldw;
    // the next block of 8·G rows (contiguous after this one where the rows are, as the token table's), fetched a
    // little each step so that it is in cache when its turn comes
    const char* next = reinterpret_cast<const char*>(w + (g + 8 * G) * ldw);
    const int64_t nextBytes = g + 16 * G <= j1 && ldw == K ? 8 * G * K * 4 : 0;
    const int64_t perStep = (nextBytes / ((K + 7) / 8) + 63) & ~int64_t{63};
    int64_t step = 0;
    for (int64_t pc = 0; pc < K; pc += KC) {
      const int64_t kb = K - pc < KC ? K - pc : KC;
      __m256 acc[G][M];
      for (int h = 0; h < G; h++)
        for (int i = 0; i < M; i++) acc[h][i] = _mm256_setzero_ps();
      int64_t k = pc;
      for (; k + 8 <= pc + kb; k += 8) {
        if (nextBytes > 0) {
          const int64_t at = step * perStep;
          for (int64_t q = 0; q < perStep && at + q < nextBytes; q += 64) _mm_prefetch(next + at + q, _MM_HINT_T1);
        }
        step++;
        for (int h = 0; h < G; h++) {
          __m256 rows[8], col[8];
          for (int p = 0; p < 8; p++) rows[p] = _mm256_loadu_ps(r[h][p] + k);
          transpose8(rows, col);
          for (int t = 0; t < 8; t++)
            for (int i = 0; i < M; i++)
              acc[h][i] = _mm256_fmadd_ps(_mm256_set1_ps(a[i * K + k + t]), col[t], acc[h][i]);
        }
      }
      for (; k < pc + kb; k++)
        for (int h = 0; h < G; h++) {
          const float* const* q = r[h];
          const __m256 col = _mm256_setr_ps(q[0][k], q[1][k], q[2][k], q[3][k], q[4][k], q[5][k], q[6][k], q[7][k]);
          for (int i = 0; i < M; i++) acc[h][i] = _mm256_fmadd_ps(_mm256_set1_ps(a[i * K + k]), col, acc[h][i]);
        }
      const bool add = accumulate || pc > 0;
      for (int h = 0; h < G && 8 * h < n; h++)
        for (int i = 0; i < M; i++) {
          _mm256_store_ps(out, acc[h][i]);
          store(c + i * ldc + g + 8 * h, out, n - 8 * h < 8 ? n - 8 * h : 8, add);
        }
    }
  }
}

template <int M>
void columns(const float* a, int64_t K, const View& b, float* c, int64_t ldc, int64_t j0, int64_t j1, bool acc) {
  if (b.cs == 1) rowsOfB<M>(a, K, b.x, b.rs, c, ldc, j0, j1, acc);
  else columnsOfB<M, (M <= 2 ? 2 : 1)>(a, K, b.x, b.cs, c, ldc, j0, j1, acc);
}

void columnsAnyM(const float* a, int64_t M, int64_t K, const View& b, float* c, int64_t ldc, int64_t j0, int64_t j1,
                 bool acc) {
  switch (M) {
    case 1: return columns<1>(a, K, b, c, ldc, j0, j1, acc);
    case 2: return columns<2>(a, K, b, c, ldc, j0, j1, acc);
    case 3: return columns<3>(a, K, b, c, ldc, j0, j1, acc);
    default: return columns<4>(a, K, b, c, ldc, j0, j1, acc);
  }
}

}  // namespace

bool smallMHandles(const View& b, int64_t M, int64_t K, int64_t N) {
  return smallMOn && M >= 1 && M <= SMALL_M && K > 0 && N > 0 && (b.cs == 1 || b.rs == 1);
}

bool gemmSmallM(const View& a, const View& b, float* c, int64_t ldc, int64_t M, int64_t K, int64_t N,
                bool accumulate, bool threaded) {
  if (!smallMHandles(b, M, K, N)) return false;
  std::vector<float> rows(static_cast<size_t>(M * K));
  for (int64_t i = 0; i < M; i++)
    for (int64_t k = 0; k < K; k++) rows[i * K + k] = a.at(i, k);
  const float* ra = rows.data();
  const int64_t groups = (N + 7) / 8;
  // at least ~256 KiB of B per thread: a smaller chunk is not worth waking one
  const int64_t grain = (int64_t{1} << 16) / (8 * K) + 1;
  std::atomic<bool> ok{true};
  const auto part = [&](int64_t g0, int64_t g1) {
    if (b.cs == 1 && !stripBuf()) {
      ok = false;
      return;
    }
    const int64_t j0 = g0 * 8, j1 = g1 * 8 < N ? g1 * 8 : N;
    columnsAnyM(ra, M, K, b, c, ldc, j0, j1, accumulate);
  };
  if (threaded) parallel_for(groups, grain, part);
  else part(0, groups);
  return ok;
}

// Decoding streams every weight once per token, and on 4 KiB pages a stream that long spends a good part of
// its time on TLB misses (more so in a virtual machine, where each miss walks two page tables): the read
// bandwidth of this machine's VM rose some 40% on 2 MiB pages. The weights sit in the wasm heap, touched
// long before a product reads them, so the whole 2 MiB pages inside B are collapsed into huge pages the first
// time (MADV_COLLAPSE, Linux 6.1+; elsewhere, or where it fails, nothing changes) and remembered.
void adviseHugePages(const float* b, int64_t floats) {
  constexpr uintptr_t HUGE = uintptr_t{1} << 21;
  static std::mutex mu;
  static std::unordered_set<uintptr_t> done;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(b) + HUGE - 1) & ~(HUGE - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(b + floats)) & ~(HUGE - 1);
  std::lock_guard<std::mutex> lock(mu);
  for (uintptr_t p = begin; p < end; p += HUGE) {
    if (!done.insert(p).second) continue;
    void* page = reinterpret_cast<void*>(p);
#ifdef MADV_HUGEPAGE
    madvise(page, HUGE, MADV_HUGEPAGE);
#endif
    madvise(page, HUGE, 25);  // MADV_COLLAPSE (older headers lack the name)
  }
}

// setSmallM(on?): whether products of at most SMALL_M rows take this path (the default) or the blocked
// GEMM; answers the setting (no argument: only answers). Both give the same bits.
napi_value ops::SetSmallM(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  if (argc == 1 && napi_get_value_bool(env, argv[0], &smallMOn) != napi_ok)
    return ops::fail(env, "setSmallM takes true or false");
  napi_value r;
  napi_get_boolean(env, smallMOn, &r);
  return r;
}

// ---- a whole GPT-2 decode step in one call (decodeGpt2) ----
//
// A decode step on tensor ops is some 260 kernels (LayerNorm, the affine layers, attention, GELU, the residual adds,
// reshapes), each with its dispatch, its output allocation and its pass over a few KiB; per token that was ~20 ms of
// a ~70 ms step at GPT-2 small. decodeGpt2 runs the same kernels in the same order on the same C++ code paths
// (the fused kernels' arithmetic, gemmParallel for every product: the bits of the step on tensor ops), reading
// the weights and the cache in place on the wasm heap and writing the grown cache and the logits there.

namespace {

inline double sumD(const float* x, int64_t n) {
  __m256d a0 = _mm256_setzero_pd(), a1 = a0;
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm_loadu_ps(x + j)));
    a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm_loadu_ps(x + j + 4)));
  }
  alignas(32) double t[4];
  _mm256_store_pd(t, _mm256_add_pd(a0, a1));
  double s = (t[0] + t[1]) + (t[2] + t[3]);
  for (; j < n; j++) s += x[j];
  return s;
}

inline double sumSqDevD(const float* x, float mean, int64_t n) {
  const __m256 mv = _mm256_set1_ps(mean);
  __m256d a0 = _mm256_setzero_pd(), a1 = a0;
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 c = _mm256_sub_ps(_mm256_loadu_ps(x + j), mv);
    const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(c)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(c, 1));
    a0 = _mm256_add_pd(a0, _mm256_mul_pd(lo, lo));
    a1 = _mm256_add_pd(a1, _mm256_mul_pd(hi, hi));
  }
  alignas(32) double t[4];
  _mm256_store_pd(t, _mm256_add_pd(a0, a1));
  double s = (t[0] + t[1]) + (t[2] + t[3]);
  for (; j < n; j++) {
    const float c = x[j] - mean;
    s += static_cast<double>(c) * c;
  }
  return s;
}

// LayerNorm of rows of D: native/ops-norm.cc's forward arithmetic (float64 moments, then (x − mean)·rstd·g + b).
void layerNormRows(const float* x, const float* g, const float* b, float eps, float* y, int64_t rows, int64_t D) {
  for (int64_t r = 0; r < rows; r++) {
    const float* xr = x + r * D;
    float* yr = y + r * D;
    const float mean = static_cast<float>(sumD(xr, D) / D);
    const float rs = static_cast<float>(1.0 / std::sqrt(sumSqDevD(xr, mean, D) / D + eps));
    const __m256 mv = _mm256_set1_ps(mean), rv = _mm256_set1_ps(rs);
    int64_t j = 0;
    for (; j + 8 <= D; j += 8) {
      const __m256 h = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + j), mv), rv);
      _mm256_storeu_ps(yr + j, _mm256_add_ps(_mm256_mul_ps(h, _mm256_loadu_ps(g + j)), _mm256_loadu_ps(b + j)));
    }
    for (; j < D; j++) yr[j] = (xr[j] - mean) * rs * g[j] + b[j];
  }
}

// GELU (tanh) in place: native/ops-norm.cc's x·σ(2u).
inline __m256 geluGate8(__m256 x) {
  const __m256 x2 = _mm256_mul_ps(x, x);
  const __m256 u = _mm256_mul_ps(_mm256_mul_ps(x, _mm256_fmadd_ps(x2, _mm256_set1_ps(0.044715f), _mm256_set1_ps(1.0f))),
                                 _mm256_set1_ps(-2.0f * 0.7978845608028654f));
  return _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), ops::exp8(u)));
}

void geluInPlace(float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    _mm256_storeu_ps(x + i, _mm256_mul_ps(v, geluGate8(v)));
  }
  for (; i < n; i++) {
    alignas(32) float t[8] = {x[i]};
    _mm256_store_ps(t, geluGate8(_mm256_load_ps(t)));
    x[i] = x[i] * t[0];
  }
}

inline float dotK(const float* a, const float* b, int64_t K) {
  __m256 acc = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= K; j += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), acc);
  float s = ops::hsum(acc);
  for (; j < K; j++) s += a[j] * b[j];
  return s;
}

inline void axpyK(float w, const float* x, float* o, int64_t K) {
  const __m256 wv = _mm256_set1_ps(w);
  int64_t j = 0;
  for (; j + 8 <= K; j += 8)
    _mm256_storeu_ps(o + j, _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + j), _mm256_loadu_ps(o + j)));
  for (; j < K; j++) o[j] += w * x[j];
}

// native/ops-attention.cc's decode attention (fused q/k/v rows of 3·H·K; the cache grown by one column).
void attend(const float* qkv, int64_t D, const float* pastK, const float* pastV, const int32_t* lengths, float* outK,
            float* outV, float* out, int64_t B, int64_t H, int64_t S, float scale) {
  const int64_t K = D / H, S1 = S + 1;
  parallel_for(B * H, ops::grainRows(2 * S1 * K), [&](int64_t i0, int64_t i1) {
    std::vector<float> p(static_cast<size_t>(S1));
    for (int64_t i = i0; i < i1; i++) {
      const int64_t b = i / H, h = i % H;
      float* ck = outK + i * S1 * K;
      float* cv = outV + i * S1 * K;
      if (S > 0) {
        std::memcpy(ck, pastK + i * S * K, S * K * sizeof(float));
        std::memcpy(cv, pastV + i * S * K, S * K * sizeof(float));
      }
      std::memcpy(ck + S * K, qkv + b * 3 * D + D + h * K, K * sizeof(float));
      std::memcpy(cv + S * K, qkv + b * 3 * D + 2 * D + h * K, K * sizeof(float));
      const int64_t n = static_cast<int64_t>(lengths[b]) + 1, first = S1 - n;
      const float* qh = qkv + b * 3 * D + h * K;
      for (int64_t j = 0; j < n; j++) p[j] = dotK(qh, ck + (first + j) * K, K);
      ops::softmaxRow(p.data(), nullptr, p.data(), n, n, scale);
      float* o = out + b * D + h * K;
      std::memset(o, 0, K * sizeof(float));
      for (int64_t j = 0; j < n; j++) axpyK(p[j], cv + (first + j) * K, o, K);
    }
  });
}

using Bf16Pack = std::vector<bf16w::Matrix*>;

bool bf16Cpu() {
#ifdef LEVANTER_BF16
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

// C (+)= A·op(B) for M rows of A (K floats each, contiguous): the native GEMM's bits either way. Up to SMALL_M rows,
// and for B with contiguous rows, gemmParallel (the small-M path, or the blocked GEMM); more rows over a transposed B
// (the tied head at a server's batch), the small-M kernel four rows at a time over strips of B's columns of ~1 MiB
// each, so B comes from memory once and from L2 for the other rows: the blocked GEMM packs all of B again each call
// and pads 16 rows to 24 (GPT-2 small's head at 16 rows, one thread: 77 ms that way, 44 ms this way).
bool product(const float* a, const View& b, float* c, int64_t M, int64_t K, int64_t N, bool accumulate) {
  if (M <= SMALL_M || b.cs == 1 || !smallMHandles(b, SMALL_M, K, N))
    return gemmParallel(a, K, 1, b.x, b.rs, b.cs, c, M, K, N, accumulate);
  if (K * N >= (int64_t{1} << 20)) adviseHugePages(b.x, (K - 1) * b.rs + (N - 1) * b.cs + 1);
  int64_t width = ((int64_t{1} << 20) / (4 * K)) & ~int64_t{7};
  width = width < 64 ? 64 : width;
  const int64_t strips = (N + width - 1) / width;
  std::atomic<bool> ok{true};
  parallel_for(strips, 1, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; s++) {
      const int64_t j0 = s * width, n = N - j0 < width ? N - j0 : width;
      const View bs{b.x + j0 * b.cs, b.rs, b.cs};
      for (int64_t i = 0; i < M; i += SMALL_M) {
        const int64_t m = M - i < SMALL_M ? M - i : SMALL_M;
        if (!gemmSmallM(View{a + i * K, K, 1}, bs, c + i * N + j0, N, m, K, n, accumulate, false)) ok = false;
      }
    }
  });
  return ok;
}

// y = bias rows + x·W (the affine kernel: y starts as the bias, the product is added): W [K, N] in place, or its
// bf16 copy.
bool affine(const float* x, const float* w, const float* bias, float* y, int64_t M, int64_t K, int64_t N,
            const bf16w::Matrix* w16) {
  for (int64_t r = 0; r < M; r++) std::memcpy(y + r * N, bias, N * sizeof(float));
#ifdef LEVANTER_BF16
  if (w16) return bf16w::gemv(*w16, x, K, y, N, M, true, Pool::get().threads() > 1);
#endif
  return product(x, View{w, N, 1}, y, M, K, N, true);
}

inline void addTo(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; i++) x[i] = x[i] + y[i];
}

}  // namespace

// decodeGpt2(buffer, offsets, ints, dims, pack?): one decode step of a GPT-2 whose tensors lie on `buffer` at the
// byte `offsets` [wte, wpe, ln_f.g, ln_f.b, logits, then per layer ln_1.g, ln_1.b, c_attn.w, c_attn.b, c_proj.w,
// c_proj.b, ln_2.g, ln_2.b, c_fc.w, c_fc.b, mlp.c_proj.w, mlp.c_proj.b, pastK, pastV, outK, outV]; ints = the B
// tokens then the B cached lengths; dims = [B, S, D, H, L, F, V, eps]; pack: packBf16's weights, or undefined.
napi_value ops::DecodeGpt2(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  const char* usage = "decodeGpt2(buffer: ArrayBuffer, offsets: Float64Array, ints: Int32Array, dims: Float64Array, "
                      "pack?): sizes that do not fit the buffer or each other";
  void* base = nullptr;
  size_t bytes = 0, no = 0, ni = 0, nd = 0;
  double *off = nullptr, *dims = nullptr;
  int32_t* ints = nullptr;
  napi_typedarray_type t1, t2, t3;
  void *p1, *p2, *p3;
  napi_value ab;
  size_t o;
  if (argc < 4 || napi_get_arraybuffer_info(env, argv[0], &base, &bytes) != napi_ok ||
      napi_get_typedarray_info(env, argv[1], &t1, &no, &p1, &ab, &o) != napi_ok || t1 != napi_float64_array ||
      napi_get_typedarray_info(env, argv[2], &t2, &ni, &p2, &ab, &o) != napi_ok || t2 != napi_int32_array ||
      napi_get_typedarray_info(env, argv[3], &t3, &nd, &p3, &ab, &o) != napi_ok || t3 != napi_float64_array ||
      nd != 8)
    return ops::fail(env, usage);
  off = static_cast<double*>(p1);
  ints = static_cast<int32_t*>(p2);
  dims = static_cast<double*>(p3);
  const int64_t B = static_cast<int64_t>(dims[0]), S = static_cast<int64_t>(dims[1]), D = static_cast<int64_t>(dims[2]),
                H = static_cast<int64_t>(dims[3]), L = static_cast<int64_t>(dims[4]), F = static_cast<int64_t>(dims[5]),
                V = static_cast<int64_t>(dims[6]);
  const float eps = static_cast<float>(dims[7]);
  const Bf16Pack* pack = nullptr;
  napi_valuetype pt = napi_undefined;
  if (argc == 5) napi_typeof(env, argv[4], &pt);
  if (pt == napi_external) {
    void* q = nullptr;
    napi_get_value_external(env, argv[4], &q);
    pack = static_cast<const Bf16Pack*>(q);
  }
  bool ok = B >= 1 && S >= 0 && D >= 1 && H >= 1 && D % H == 0 && L >= 1 && F >= 1 && V >= 1 &&
            no == static_cast<size_t>(5 + 16 * L) && ni == static_cast<size_t>(2 * B) &&
            (!pack || pack->size() == static_cast<size_t>(4 * L + 1));
  for (int64_t b = 0; ok && b < B; b++) ok = ints[b] >= 0 && ints[b] < V && ints[B + b] >= 0 && ints[B + b] <= S;
  const int64_t KV = B * H * S * (D / H), KV1 = B * H * (S + 1) * (D / H);
  // floats of each tensor, in the offsets' order (wpe: rows up to the largest position asked for)
  int64_t maxPos = 0;
  for (int64_t b = 0; ok && b < B; b++) maxPos = ints[B + b] > maxPos ? ints[B + b] : maxPos;
  const int64_t head[5] = {V * D, (maxPos + 1) * D, D, D, B * V};
  const int64_t layer[16] = {D, D, D * 3 * D, 3 * D, D * D, D, D, D, D * F, F, F * D, D, KV, KV, KV1, KV1};
  float* at[5 + 16 * 64] = {};
  if (ok && L > 64) ok = false;
  for (size_t i = 0; ok && i < no; i++) {
    const double d = off[i];
    const int64_t n = i < 5 ? head[i] : layer[(i - 5) % 16];
    ok = d >= 0 && d == std::floor(d) && static_cast<int64_t>(d) % 4 == 0 &&
         static_cast<uint64_t>(d) + static_cast<uint64_t>(n) * 4 <= bytes;
    if (ok) at[i] = reinterpret_cast<float*>(static_cast<char*>(base) + static_cast<int64_t>(d));
  }
  if (!ok) return ops::fail(env, usage);
  std::vector<float> x(B * D), a(B * D), qkv(B * 3 * D), att(B * D), y(B * D), h(B * F);
  const float* wte = at[0];
  const float* wpe = at[1];
  for (int64_t b = 0; b < B; b++)
    for (int64_t j = 0; j < D; j++) x[b * D + j] = wte[ints[b] * D + j] + wpe[ints[B + b] * D + j];
  const int32_t* lengths = ints + B;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D / H)));
  const auto w16 = [&](int64_t i) -> const bf16w::Matrix* { return pack ? (*pack)[i] : nullptr; };
  for (int64_t l = 0; l < L && ok; l++) {
    float* const* p = at + 5 + 16 * l;
    layerNormRows(x.data(), p[0], p[1], eps, a.data(), B, D);
    ok = affine(a.data(), p[2], p[3], qkv.data(), B, D, 3 * D, w16(4 * l));
    attend(qkv.data(), D, p[12], p[13], lengths, p[14], p[15], att.data(), B, H, S, scale);
    ok = ok && affine(att.data(), p[4], p[5], y.data(), B, D, D, w16(4 * l + 1));
    addTo(x.data(), y.data(), B * D);
    layerNormRows(x.data(), p[6], p[7], eps, a.data(), B, D);
    ok = ok && affine(a.data(), p[8], p[9], h.data(), B, D, F, w16(4 * l + 2));
    geluInPlace(h.data(), B * F);
    ok = ok && affine(h.data(), p[10], p[11], y.data(), B, F, D, w16(4 * l + 3));
    addTo(x.data(), y.data(), B * D);
  }
  layerNormRows(x.data(), at[2], at[3], eps, a.data(), B, D);
#ifdef LEVANTER_BF16
  if (ok && pack) ok = bf16w::gemv(*(*pack)[4 * L], a.data(), D, at[4], V, B, false, Pool::get().threads() > 1);
  else
#endif
    ok = ok && product(a.data(), View{wte, 1, D}, at[4], B, D, V, false);
  if (!ok) return ops::fail(env, "decodeGpt2: out of memory for a product's buffers");
  return nullptr;
}

// packBf16(buffer, offsets, shapes): the matrices at byte `offsets` (shapes: K, N, row stride, column stride in
// floats, per matrix: op(B)(k, j) = b[k·rs + j·cs]) converted once to bf16 for decodeGpt2; an external value that
// frees them when collected. Throws where the CPU or the build lacks AVX512_BF16.
napi_value ops::PackBf16(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  if (!bf16Cpu()) return ops::fail(env, "packBf16: this CPU lacks AVX512_BF16, or the addon was built without it");
  void* base = nullptr;
  size_t bytes = 0, no = 0, ns = 0, o;
  napi_typedarray_type t1, t2;
  void *p1, *p2;
  napi_value ab;
  if (argc != 3 || napi_get_arraybuffer_info(env, argv[0], &base, &bytes) != napi_ok ||
      napi_get_typedarray_info(env, argv[1], &t1, &no, &p1, &ab, &o) != napi_ok || t1 != napi_float64_array ||
      napi_get_typedarray_info(env, argv[2], &t2, &ns, &p2, &ab, &o) != napi_ok || t2 != napi_float64_array ||
      ns != 4 * no || no == 0)
    return ops::fail(env, "packBf16(buffer: ArrayBuffer, offsets: Float64Array, shapes: Float64Array of 4 per matrix)");
  const double* off = static_cast<double*>(p1);
  const double* sh = static_cast<double*>(p2);
  auto* pack = new Bf16Pack();
  bool ok = true;
#ifdef LEVANTER_BF16
  for (size_t i = 0; ok && i < no; i++) {
    const int64_t K = static_cast<int64_t>(sh[4 * i]), N = static_cast<int64_t>(sh[4 * i + 1]),
                  rs = static_cast<int64_t>(sh[4 * i + 2]), cs = static_cast<int64_t>(sh[4 * i + 3]);
    const double d = off[i];
    ok = K >= 1 && N >= 1 && rs >= 0 && cs >= 0 && d >= 0 && static_cast<int64_t>(d) % 4 == 0 &&
         static_cast<uint64_t>(d) + 4 * static_cast<uint64_t>((K - 1) * rs + (N - 1) * cs + 1) <= bytes;
    const float* b = ok ? reinterpret_cast<const float*>(static_cast<char*>(base) + static_cast<int64_t>(d)) : nullptr;
    bf16w::Matrix* m = ok ? bf16w::pack(b, rs, cs, K, N) : nullptr;
    ok = m != nullptr;
    if (m) pack->push_back(m);
  }
#endif
  if (!ok) {
    for (auto* m : *pack) bf16w::release(m);
    delete pack;
    return ops::fail(env, "packBf16: a matrix does not fit the buffer, or memory ran out");
  }
  napi_value out;
  napi_create_external(
      env, pack,
      [](napi_env, void* data, void*) {
        auto* p = static_cast<Bf16Pack*>(data);
#ifdef LEVANTER_BF16
        for (auto* m : *p) bf16w::release(m);
#endif
        delete p;
      },
      nullptr, &out);
  return out;
}

// gemvBf16(pack, i, a, c, M, accumulate): C (+)= bf16(A)·W_i for packBf16's matrix i and M rows of A (tests).
napi_value ops::GemvBf16(napi_env env, napi_callback_info info) {
  Args args(env, info, "gemvBf16(pack, i: number, a, c: Float32Array, M: number, accumulate: boolean)", 6);
  void* q = nullptr;
  if (args.argc != 6 || napi_get_value_external(env, args.argv[0], &q) != napi_ok || !q)
    return ops::fail(env, "gemvBf16: the first argument is not a packBf16 value");
  const auto* pack = static_cast<const Bf16Pack*>(q);
  const int64_t i = args.integer(1), M = args.integer(4);
  int64_t na = 0, nc = 0;
  const float* a = args.f32(2, &na);
  float* c = args.f32(3, &nc);
  const bool accumulate = args.flag(5);
  const bool fits = i < static_cast<int64_t>(pack->size()) && M >= 1;
  if (!args.check(fits && na == M * (*pack)[i]->K && nc == M * (*pack)[i]->N)) return nullptr;
#ifdef LEVANTER_BF16
  const bf16w::Matrix& w = *(*pack)[i];
  if (!bf16w::gemv(w, a, w.K, c, w.N, M, accumulate, Pool::get().threads() > 1))
    return ops::fail(env, "gemvBf16: out of memory");
#endif
  return nullptr;
}

}  // namespace levanter
