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

// Columns of B a panel holds: KC × 256 floats (256 KiB) in L2.
constexpr int64_t BATCH_PANEL = 256;

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

namespace ops {
// gemmRowsBatch(a, b, c: Float32Array, M, K, N: number, accumulate, avx2?: boolean): C (+)= A·B for tests
// (native/decode.cc).
napi_value GemmRowsBatch(napi_env env, napi_callback_info info);
}  // namespace ops

}  // namespace levanter
