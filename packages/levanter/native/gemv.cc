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
//
// On several threads (Pool::parallel_chunks: pieces claimed in turn, so a worker the machine gives no core
// stalls nothing), B rows contiguous is split by KC-deep passes (passesThreaded), B transposed by column groups.
//
// Also the decode step's batch product (native/gemv-batch.h: more rows than SMALL_M, a server's batch), the same
// bits again: B by panels copied into an L2 buffer, tiles of C with their sums in registers.
#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "gemm-impl.h"
#include "gemm.h"
#include "gemv-batch.h"
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

// B rows contiguous, one row of A: columns [j0, j1) of C, R rows of B at a time, each 8-float run of partial sums
// loaded once, R FMAs applied in k order and stored once. R streams at once (no software prefetch: the hardware
// prefetchers keep R sequential streams going) read faster here than a single one does: GPT-2 small's 48 block
// matrices at 1.3–1.5× the one-row-at-a-time kernel, at or above the one-stream read-only sum (load ~18).
constexpr int ROWS_AT_ONCE = 8;

void rowsOfB1(const float* a, int64_t K, const float* b, int64_t ldb, float* c, int64_t j0, int64_t j1,
              bool accumulate) {
  constexpr int R = ROWS_AT_ONCE;
  float* acc = stripBuffer;
  for (int64_t s0 = j0; s0 < j1; s0 += STRIP_FLOATS) {
    const int64_t w = j1 - s0 < STRIP_FLOATS ? j1 - s0 : STRIP_FLOATS;
    const int64_t w8 = w & ~int64_t{7};
    const __m256i tail = firstLanes(w - w8);
    for (int64_t pc = 0; pc < K; pc += KC) {
      const int64_t kb = K - pc < KC ? K - pc : KC;
      std::memset(acc, 0, sizeof(float) * ((w + 7) & ~int64_t{7}));
      int64_t k = pc;
      for (; k + R <= pc + kb; k += R) {
        const float* row[R];
        __m256 x[R];
        for (int r = 0; r < R; r++) row[r] = b + (k + r) * ldb + s0, x[r] = _mm256_set1_ps(a[k + r]);
        int64_t j = 0;
        for (; j + 16 <= w8; j += 16) {
          float* p = acc + j;
          __m256 s0v = _mm256_load_ps(p), s1v = _mm256_load_ps(p + 8);
          for (int r = 0; r < R; r++) {
            s0v = _mm256_fmadd_ps(x[r], _mm256_loadu_ps(row[r] + j), s0v);
            s1v = _mm256_fmadd_ps(x[r], _mm256_loadu_ps(row[r] + j + 8), s1v);
          }
          _mm256_store_ps(p, s0v);
          _mm256_store_ps(p + 8, s1v);
        }
        for (; j < w8; j += 8) {
          float* p = acc + j;
          __m256 s = _mm256_load_ps(p);
          for (int r = 0; r < R; r++) s = _mm256_fmadd_ps(x[r], _mm256_loadu_ps(row[r] + j), s);
          _mm256_store_ps(p, s);
        }
        if (w8 < w) {
          float* p = acc + w8;
          __m256 s = _mm256_load_ps(p);
          for (int r = 0; r < R; r++) s = _mm256_fmadd_ps(x[r], _mm256_maskload_ps(row[r] + w8, tail), s);
          _mm256_store_ps(p, s);
        }
      }
      for (; k < pc + kb; k++) {
        const float* row = b + k * ldb + s0;
        const __m256 x = _mm256_set1_ps(a[k]);
        int64_t j = 0;
        for (; j < w8; j += 8) {
          float* p = acc + j;
          _mm256_store_ps(p, _mm256_fmadd_ps(x, _mm256_loadu_ps(row + j), _mm256_load_ps(p)));
        }
        if (w8 < w) {
          float* p = acc + w8;
          _mm256_store_ps(p, _mm256_fmadd_ps(x, _mm256_maskload_ps(row + w8, tail), _mm256_load_ps(p)));
        }
      }
      store(c + s0, acc, w, accumulate || pc > 0);
    }
  }
}

// B rows contiguous: columns [j0, j1) of C for the M rows of A (a: M rows of K floats).
template <int M>
void rowsOfB(const float* a, int64_t lda, int64_t K, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t j0,
             int64_t j1, bool accumulate) {
  if (M == 1) return rowsOfB1(a, K, b, ldb, c, j0, j1, accumulate);
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
        for (int i = 0; i < M; i++) x[i] = _mm256_set1_ps(a[i * lda + k]);
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
// columns repeats its last column in the missing lanes and stores only its own. One row of A takes G = 1 and
// prefetches two blocks ahead: 8 streams of the token table read ~15% faster here than 16 (the tied head of
// GPT-2 small at ~0.9 of the one-stream read-only sum, from ~0.8).
template <int M, int G, int AHEAD = 1>
void columnsOfB(const float* a, int64_t K, const float* w, int64_t ldw, float* c, int64_t ldc, int64_t j0, int64_t j1,
                bool accumulate) {
  alignas(32) float out[8];
  for (int64_t g = j0; g < j1; g += 8 * G) {
    const int64_t n = j1 - g < 8 * G ? j1 - g : 8 * G;
    const float* r[G][8];
    for (int q = 0; q < 8 * G; q++) r[q / 8][q % 8] = w + (g + (q < n ? q : n - 1)) * ldw;
    // the block of 8·G rows AHEAD blocks on (contiguous after this one where the rows are, as the token table's),
    // fetched a little each step so that it is in cache when its turn comes
    const char* next = reinterpret_cast<const char*>(w + (g + 8 * G * AHEAD) * ldw);
    const int64_t nextBytes = g + 8 * G * (AHEAD + 1) <= j1 && ldw == K ? 8 * G * K * 4 : 0;
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
  if (b.cs == 1) rowsOfB<M>(a, K, K, b.x, b.rs, c, ldc, j0, j1, acc);
  else if (M == 1) columnsOfB<1, 1, 2>(a, K, b.x, b.cs, c, ldc, j0, j1, acc);
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

// One KC-deep pass of B rows contiguous, its sums from zero stored to p (M rows of ldp floats): columns [j0, j1),
// k from pc, kb deep.
void passAnyM(const float* a, int64_t M, int64_t K, const View& b, float* p, int64_t ldp, int64_t pc, int64_t kb,
              int64_t j0, int64_t j1) {
  const float* bp = b.x + pc * b.rs;
  switch (M) {
    case 1: return rowsOfB<1>(a + pc, K, kb, bp, b.rs, p, ldp, j0, j1, false);
    case 2: return rowsOfB<2>(a + pc, K, kb, bp, b.rs, p, ldp, j0, j1, false);
    case 3: return rowsOfB<3>(a + pc, K, kb, bp, b.rs, p, ldp, j0, j1, false);
    default: return rowsOfB<4>(a + pc, K, kb, bp, b.rs, p, ldp, j0, j1, false);
  }
}

inline thread_local std::vector<float> passSums;

// B rows contiguous on the pool's threads: split by KC-deep passes (each a contiguous block of B's rows, read in
// order: splitting the columns instead reads every row in pieces, ~60% more CPU time per byte here), each pass's
// sums into a buffer of their own, then added to C in pass order, as the one-thread chain adds them: the same bits.
// The passes past the last whole round (3 passes on 2 threads: the third) split by columns, so that no thread waits
// on a whole pass; the items claimed in turn (Pool::parallel_chunks), so a worker without a core stalls nothing.
bool passesThreaded(const float* a, int64_t M, int64_t K, const View& b, float* c, int64_t ldc, int64_t N,
                    bool accumulate) {
  const int64_t passes = (K + KC - 1) / KC, threads = Pool::get().threads();
  const int64_t whole = passes / threads * threads, split = passes - whole;
  const int64_t items = whole + split * threads;
  if (passSums.size() < static_cast<size_t>(passes * M * N)) passSums.resize(passes * M * N);
  float* sums = passSums.data();
  std::atomic<bool> ok{true};
  parallel_chunks(items, 1, [&](int64_t i0, int64_t i1) {
    if (!stripBuf()) {
      ok = false;
      return;
    }
    for (int64_t i = i0; i < i1; i++) {
      const int64_t pass = i < whole ? i : whole + (i - whole) / threads, part = i < whole ? 0 : (i - whole) % threads;
      const int64_t parts = i < whole ? 1 : threads, groups = (N + 7) / 8;
      const int64_t j0 = groups * part / parts * 8, j1 = std::min(groups * (part + 1) / parts * 8, N);
      const int64_t pc = pass * KC, kb = K - pc < KC ? K - pc : KC;
      if (j0 < j1) passAnyM(a, M, K, b, sums + pass * M * N, N, pc, kb, j0, j1);
    }
  });
  if (!ok) return false;
  for (int64_t i = 0; i < M; i++) {
    float* ci = c + i * ldc;
    for (int64_t pass = 0; pass < passes; pass++) {
      const float* si = sums + (pass * M + i) * N;
      const bool add = accumulate || pass > 0;
      int64_t j = 0;
      for (; j + 8 <= N; j += 8) {
        const __m256 v = _mm256_loadu_ps(si + j);
        _mm256_storeu_ps(ci + j, add ? _mm256_add_ps(_mm256_loadu_ps(ci + j), v) : v);
      }
      for (; j < N; j++) ci[j] = add ? ci[j] + si[j] : si[j];
    }
  }
  return true;
}

// ---- the batch product (native/gemv-batch.h) ----

// The AVX2 kernel over a packed panel (panelAvx2) is in native/gemv-batch.h.

// op(B)'s rows pc…pc+kb−1, columns p…p+pw−1, into tiles of TW columns (tile t: kb × TW floats, k-major; columns
// past pw hold zeros or a copy of the last one, never stored). B rows contiguous: each row's run read in order.
template <int TW>
void packRows(const float* b, int64_t ldb, int64_t pc, int64_t kb, int64_t p, int64_t pw, float* panel) {
  for (int64_t k = 0; k < kb; k++) {
    const float* row = b + (pc + k) * ldb + p;
    for (int64_t t = 0; t < pw; t += 8) {
      float* dst = panel + (t / TW) * kb * TW + k * TW + t % TW;
      const int64_t n = pw - t;
      _mm256_store_ps(dst, n >= 8 ? _mm256_loadu_ps(row + t) : _mm256_maskload_ps(row + t, firstLanes(n)));
    }
  }
}

// The same from B transposed (op(B)(k, j) = w[j·ldw + k], the tied head's token table): eight of its rows at a time,
// eight floats along k of each, transposed in registers.
template <int TW>
void packColumns(const float* w, int64_t ldw, int64_t pc, int64_t kb, int64_t p, int64_t pw, float* panel) {
  for (int64_t j = 0; j < pw; j += 8) {
    const float* r[8];
    for (int q = 0; q < 8; q++) r[q] = w + (p + (j + q < pw ? j + q : pw - 1)) * ldw + pc;
    float* dst = panel + (j / TW) * kb * TW + j % TW;
    int64_t k = 0;
    for (; k + 8 <= kb; k += 8) {
      __m256 rows[8], col[8];
      for (int q = 0; q < 8; q++) rows[q] = _mm256_loadu_ps(r[q] + k);
      transpose8(rows, col);
      for (int t = 0; t < 8; t++) _mm256_store_ps(dst + (k + t) * TW, col[t]);
    }
    for (; k < kb; k++)
      _mm256_store_ps(dst + k * TW, _mm256_setr_ps(r[0][k], r[1][k], r[2][k], r[3][k], r[4][k], r[5][k], r[6][k],
                                                   r[7][k]));
  }
}

// Columns [j0, j1) of C for all M rows (a: M rows of K floats): per KC-deep block of k, per panel of W columns
// (BATCH_PANEL; BATCH_PANEL_AVX2 for the AVX2 kernel), the panel packed (TW-wide tiles: 32 for the AVX-512 kernel,
// 16 for the AVX2 one) and computed.
template <int TW>
void batchColumns(const float* a, int64_t M, int64_t K, const View& b, float* c, int64_t ldc, int64_t j0, int64_t j1,
                  bool accumulate, float* panel) {
  constexpr int64_t W = TW == 32 ? BATCH_PANEL : BATCH_PANEL_AVX2;
  for (int64_t pc = 0; pc < K; pc += KC) {
    const int64_t kb = K - pc < KC ? K - pc : KC;
    const bool add = accumulate || pc > 0;
    for (int64_t p = j0; p < j1; p += W) {
      const int64_t pw = j1 - p < W ? j1 - p : W;
      if (b.cs == 1) packRows<TW>(b.x, b.rs, pc, kb, p, pw, panel);
      else packColumns<TW>(b.x, b.cs, pc, kb, p, pw, panel);
      // the next panel: this block's next columns, else the next block's first
      Ahead ahead;
      const int64_t np = p + W < j1 ? p + W : j0, npc = np == j0 ? pc + KC : pc;
      if (npc < K) {
        const int64_t nkb = K - npc < KC ? K - npc : KC, npw = j1 - np < W ? j1 - np : W;
        if (b.cs == 1) ahead = Ahead{b.x + npc * b.rs + np, b.rs, (npw + 15) / 16, nkb};
        else ahead = Ahead{b.x + np * b.cs + npc, b.cs, (nkb + 15) / 16, npw};
        const int64_t G = TW == 32 ? 8 : 4, steps = (pw + TW - 1) / TW * ((M + G - 1) / G) * kb;
        ahead.per = (ahead.lines * ahead.runs + steps - 1) / steps;
      }
#ifdef LEVANTER_AVX512
      if (TW == 32) {
        panelAvx512(a + pc, M, K, panel, kb, pw, c + p, ldc, add, ahead);
        continue;
      }
#endif
      panelAvx2(a + pc, M, K, panel, kb, pw, c + p, ldc, add, ahead);
    }
  }
}

inline thread_local float* panelBuffer = nullptr;

bool batchAvx512() {
#ifdef LEVANTER_AVX512
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
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
  const int64_t threads = threaded ? Pool::get().threads() : 1;
  if (threads > 1 && b.cs == 1 && K > KC) return passesThreaded(ra, M, K, b, c, ldc, N, accumulate);
  std::atomic<bool> ok{true};
  const auto part = [&](int64_t g0, int64_t g1) {
    if (b.cs == 1 && !stripBuf()) {
      ok = false;
      return;
    }
    const int64_t j0 = g0 * 8, j1 = g1 * 8 < N ? g1 * 8 : N;
    columnsAnyM(ra, M, K, b, c, ldc, j0, j1, accumulate);
  };
  if (threads == 1) {
    part(0, groups);
    return ok;
  }
  // by column groups, claimed in turn: B transposed (each column a contiguous run of K floats) in some 8 chunks a
  // thread, so a thread that falls behind hands the rest to the others; B rows contiguous (one pass deep: nothing to
  // split by pass) in one chunk a thread, since a narrower one reads every row in more pieces
  const int64_t per = b.cs == 1 ? threads : 8 * threads, chunk = (groups + per - 1) / per;
  parallel_chunks(groups, chunk > grain ? chunk : grain, part);
  return ok;
}

bool gemmRowsBatch(const float* a, int64_t M, int64_t K, const View& b, float* c, int64_t ldc, int64_t N,
                   bool accumulate, bool threaded, bool avx512) {
#ifdef LEVANTER_AVX512
  static const bool wide = batchAvx512();
  avx512 = avx512 && wide;
#else
  avx512 = false;
#endif
  const int64_t panels = (N + BATCH_PANEL - 1) / BATCH_PANEL;
  std::atomic<bool> ok{true};
  const auto part = [&](int64_t p0, int64_t p1) {
    if (!panelBuffer) panelBuffer = static_cast<float*>(std::aligned_alloc(64, KC * BATCH_PANEL * sizeof(float)));
    if (!panelBuffer) {
      ok = false;
      return;
    }
    const int64_t j0 = p0 * BATCH_PANEL, j1 = p1 * BATCH_PANEL < N ? p1 * BATCH_PANEL : N;
    if (avx512) batchColumns<32>(a, M, K, b, c, ldc, j0, j1, accumulate, panelBuffer);
    else batchColumns<16>(a, M, K, b, c, ldc, j0, j1, accumulate, panelBuffer);
  };
  if (threaded) parallel_for(panels, 1, part);
  else part(0, panels);
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

}  // namespace levanter
