// The batch product of the decode step (native/gemv.cc, its AVX-512 kernel in native/gemv-batch512.cc): C (+)=
// A·op(B) for a server's rows of A (any M) over a weight matrix read in place (no copy of it kept or made in memory):
// each KC-deep block of op(B)'s rows is taken a panel of BATCH_PANEL columns at a time, copied into a buffer in L2
// (B's rows each read in order; the token table's transposed eight by eight in registers), and every group of
// rows' tiles of C computed from there with their sums in registers. So B comes from memory once a call (the blocked
// GEMM writes a packed copy of all of B and reads it back, and pads 16 rows to 24).
#pragma once

#include <immintrin.h>
#include <node_api.h>

#include <cstdint>

#include "gemm-impl.h"

namespace levanter {

// Columns of B a panel holds: KC × 256 floats (256 KiB) in L2; the AVX2 kernel's panels are half that: the panel
// being computed and the next one, fetched meanwhile, then leave room in a 512 KiB L2 (GPT-2 small's block products
// at 16 rows, Zen 3: 1.7× the GFLOP/s of 256-column panels with the 6-row tiles; 64 columns about the same as 128).
constexpr int64_t BATCH_PANEL = 256;
constexpr int64_t BATCH_PANEL_AVX2 = 128;

// C (+)= A·op(B): A M rows of K floats (rows K apart), op(B) [K, N] with contiguous rows (b.cs 1) or columns (b.rs 1:
// the tied head's token table), C rows ldc floats apart; the blocked GEMM's bits (native/gemm-impl.h: per KC-deep
// pass from zero, one FMA per k in k order, the pass's sum stored or added in pass order). On the pool's threads (by
// panels) where `threaded`; false where its buffer cannot be allocated. avx512: false keeps to the AVX2 kernel
// (tests; the same bits).
bool gemmRowsBatch(const float* a, int64_t M, int64_t K, const View& b, float* c, int64_t ldc, int64_t N,
                   bool accumulate, bool threaded, bool avx512 = true);

// The next panel's cache lines, fetched into L2 a few per k step of the current panel's tiles so that they arrive
// while it computes (copying a panel whose rows come from memory then finds them there): `runs` runs of `lines` lines
// each, run r at base + r·ld floats, `per` lines a step.
struct Ahead {
  const float* base = nullptr;
  int64_t ld = 0, lines = 0, runs = 0, per = 0, r = 0, l = 0;
  void step() {
    for (int64_t q = 0; q < per && r < runs; q++) {
      _mm_prefetch(reinterpret_cast<const char*>(base + r * ld + 16 * l), _MM_HINT_T1);
      if (++l == lines) l = 0, r++;
    }
  }
};

// The pw columns of C a packed panel gives (kb of k from a's columns, tiles of 32 columns, kb × 32 floats each), on
// AVX-512: call only where the CPU has AVX-512F.
void panelAvx512(const float* a, int64_t M, int64_t K, const float* panel, int64_t kb, int64_t pw, float* c,
                 int64_t ldc, bool add, Ahead& ahead);

// ---- the AVX2 kernel over a packed panel ----
//
// Tiles of up to 6 rows × 16 columns of C, twelve ymm sums (the blocked GEMM's AVX2 tile, native/gemm.cc): per k two
// loads of the panel and one broadcast per row for 2·MR FMAs. M rows are split into ⌈M/6⌉ groups of near-equal size
// (16 rows: 6 + 5 + 5), so no group is left with one or two rows. Each tile of the panel (kb × 16 floats, L1-sized)
// is taken by every group in turn. Internal linkage: native/gemv-batch512.cc, compiled for AVX-512, includes this
// header too, and an inline function both units emitted could be linked from the AVX-512 one.
namespace {

// A tile of MR rows × 16 columns of C over a KC-deep pass: its sums in registers from zero, one FMA per k in k order,
// stored or added once (c + sum); a: the group's rows interleaved (MR floats per k), bt: the tile's kb × 16 floats,
// k-major; nw ≤ 16 columns kept.
template <int MR>
inline void batchTileAvx2(const float* a, const float* bt, int64_t kb, float* c, int64_t ldc, int64_t nw, bool add,
                          Ahead& ahead) {
  __m256 s0[MR], s1[MR];
  for (int i = 0; i < MR; i++) s0[i] = s1[i] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 4 <= kb; k += 4) {
    ahead.step();
    for (int u = 0; u < 4; u++) {
      const __m256 b0 = _mm256_load_ps(bt + 16 * (k + u)), b1 = _mm256_load_ps(bt + 16 * (k + u) + 8);
      for (int i = 0; i < MR; i++) {
        const __m256 x = _mm256_broadcast_ss(a + MR * (k + u) + i);
        s0[i] = _mm256_fmadd_ps(x, b0, s0[i]);
        s1[i] = _mm256_fmadd_ps(x, b1, s1[i]);
      }
    }
  }
  for (; k < kb; k++) {
    const __m256 b0 = _mm256_load_ps(bt + 16 * k), b1 = _mm256_load_ps(bt + 16 * k + 8);
    for (int i = 0; i < MR; i++) {
      const __m256 x = _mm256_broadcast_ss(a + MR * k + i);
      s0[i] = _mm256_fmadd_ps(x, b0, s0[i]);
      s1[i] = _mm256_fmadd_ps(x, b1, s1[i]);
    }
  }
  if (nw == 16) {
    for (int i = 0; i < MR; i++) {
      float* ci = c + i * ldc;
      _mm256_storeu_ps(ci, add ? _mm256_add_ps(_mm256_loadu_ps(ci), s0[i]) : s0[i]);
      _mm256_storeu_ps(ci + 8, add ? _mm256_add_ps(_mm256_loadu_ps(ci + 8), s1[i]) : s1[i]);
    }
    return;
  }
  alignas(32) float out[16];
  for (int i = 0; i < MR; i++) {
    _mm256_store_ps(out, s0[i]);
    _mm256_store_ps(out + 8, s1[i]);
    float* ci = c + i * ldc;
    for (int64_t j = 0; j < nw; j++) ci[j] = add ? ci[j] + out[j] : out[j];
  }
}

// Rows of A a panel call takes at a time (more are taken in turn), their kb floats copied interleaved per group (a
// group's MR floats of each k together) into a per-thread buffer: A's rows lie K floats apart, and at K a multiple of
// 1024 (GPT-2 small's MLP projection, K 3072) every row's k falls in the same L1 set.
constexpr int64_t BATCH_ROWS_AVX2 = 48;
alignas(64) inline thread_local float batchRowsAvx2[BATCH_ROWS_AVX2 * KC];

// Rows [0, M ≤ BATCH_ROWS_AVX2) of the panel's columns: A's block copied, then every 16-column tile by every group.
inline void panelRowsAvx2(const float* a, int64_t M, int64_t K, const float* panel, int64_t kb, int64_t pw, float* c,
                          int64_t ldc, bool add, Ahead& ahead) {
  const int64_t groups = (M + 5) / 6;
  // group g: rows [first, first + mr), the M rows shared out as evenly as ⌈M/6⌉ groups allow
  const auto rows = [&](int64_t g, int64_t first) { return (M - first + groups - g - 1) / (groups - g); };
  for (int64_t g = 0, i = 0; g < groups; g++) {
    const int64_t mr = rows(g, i);
    float* dst = batchRowsAvx2 + i * kb;
    for (int64_t r = 0; r < mr; r++)
      for (int64_t k = 0; k < kb; k++) dst[k * mr + r] = a[(i + r) * K + k];
    i += mr;
  }
  for (int64_t t = 0; t < pw; t += 16) {
    const float* bt = panel + t * kb;
    const int64_t nw = pw - t < 16 ? pw - t : 16;
    for (int64_t g = 0, i = 0; g < groups; g++) {
      const int64_t mr = rows(g, i);
      const float* ai = batchRowsAvx2 + i * kb;
      float* ci = c + i * ldc + t;
      switch (mr) {
        case 1: batchTileAvx2<1>(ai, bt, kb, ci, ldc, nw, add, ahead); break;
        case 2: batchTileAvx2<2>(ai, bt, kb, ci, ldc, nw, add, ahead); break;
        case 3: batchTileAvx2<3>(ai, bt, kb, ci, ldc, nw, add, ahead); break;
        case 4: batchTileAvx2<4>(ai, bt, kb, ci, ldc, nw, add, ahead); break;
        case 5: batchTileAvx2<5>(ai, bt, kb, ci, ldc, nw, add, ahead); break;
        default: batchTileAvx2<6>(ai, bt, kb, ci, ldc, nw, add, ahead);
      }
      i += mr;
    }
  }
}

// The pw columns of C a packed panel gives (kb ≤ KC of k from a's columns, tiles of 16 columns, kb × 16 floats
// each), on AVX2, BATCH_ROWS_AVX2 rows at a time. Sets ahead's pace to its own steps (one per 4 k of a tile): the
// next panel's lines all fetched by the last.
inline void panelAvx2(const float* a, int64_t M, int64_t K, const float* panel, int64_t kb, int64_t pw, float* c,
                      int64_t ldc, bool add, Ahead& ahead) {
  int64_t steps = 0;
  for (int64_t i = 0; i < M; i += BATCH_ROWS_AVX2) {
    const int64_t m = M - i < BATCH_ROWS_AVX2 ? M - i : BATCH_ROWS_AVX2;
    steps += (pw + 15) / 16 * ((m + 5) / 6) * (kb / 4 > 0 ? kb / 4 : 1);
  }
  if (ahead.runs > 0) ahead.per = (ahead.lines * ahead.runs + steps - 1) / steps;
  for (int64_t i = 0; i < M; i += BATCH_ROWS_AVX2) {
    const int64_t m = M - i < BATCH_ROWS_AVX2 ? M - i : BATCH_ROWS_AVX2;
    panelRowsAvx2(a + i * K, m, K, panel, kb, pw, c + i * ldc, ldc, add, ahead);
  }
}

}  // namespace

namespace ops {
// gemmRowsBatch(a, b, c: Float32Array, M, K, N: number, accumulate, avx2?: boolean): C (+)= A·B for tests
// (native/decode.cc).
napi_value GemmRowsBatch(napi_env env, napi_callback_info info);
}  // namespace ops

}  // namespace levanter
