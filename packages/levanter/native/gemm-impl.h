// The blocked GEMM shared by the micro-kernels (native/gemm.cc: AVX2 6×16; native/gemm512.cc:
// AVX-512 12×32), as templates over the tile size and the micro-kernel so each instantiation is
// compiled with its own instruction set. KC is common to all: every element of C is the FMA chain
// over one KC-deep pass at a time, from zero, added to C in pass order, so the two kernels give the
// same bits, and so do the row and column splits over threads. Only KC fixes the bits: the blocks
// (Blocking: mc, nc, group, the order of a group's passes) and the packing choose the memory traffic
// and the loop order, not the arithmetic.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace levanter {

#if defined(__AVX512F__)
// r[i] = row i of a 16×16 block of floats in, column i out (packing's transposes, 64 shuffles for 256 floats).
inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; i++) {
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  for (int i = 0; i < 4; i++) {
    t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
    t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
  }
  for (int i = 0; i < 4; i++) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    r[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
    r[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xdd);
  }
}
#elif defined(__AVX2__)
// r[i] = row i of an 8×8 block of floats in, column i out (the AVX2 kernel's packing transposes, 24 shuffles).
inline void transpose8(__m256 r[8]) {
  __m256 t[8];
  for (int i = 0; i < 4; i++) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; i++) {
    const __m256 a = t[4 * i], b = t[4 * i + 1], c = t[4 * i + 2], d = t[4 * i + 3];
    r[4 * i] = _mm256_shuffle_ps(a, c, 0x44);
    r[4 * i + 1] = _mm256_shuffle_ps(a, c, 0xee);
    r[4 * i + 2] = _mm256_shuffle_ps(b, d, 0x44);
    r[4 * i + 3] = _mm256_shuffle_ps(b, d, 0xee);
  }
  for (int i = 0; i < 4; i++) {
    t[i] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x20);
    t[i + 4] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x31);
  }
  for (int i = 0; i < 8; i++) r[i] = t[i];
}
#endif

constexpr int64_t KC = 256;

// The blocks, chosen per kernel and per machine (native/gemm.cc): mc rows of A (a multiple of the kernel's MR) and
// nc columns of B (a multiple of its NR) per packed block, `group` passes packed together; with tilePasses a tile of
// C takes the group's passes back to back while it sits in L1, so a product K ≤ group·KC deep writes C once instead
// of reading and writing it once per pass (the head's 50257-wide C is 206 MB at GPT-2 small's 1024 rows); else each
// pass runs over the whole mc×nc block before the next (one B panel kept in L1 across the block's slivers).
struct Blocking {
  int64_t mc, nc, group;
  bool tilePasses;
};
// Tuned on an AVX-512 machine with 2 MiB of L2 a core (the AVX-512 kernel's, and the AVX2 one's there).
constexpr Blocking WIDE_L2{144, 1024, 4, true};
constexpr int64_t MC = WIDE_L2.mc, NC = WIDE_L2.nc, GROUP = WIDE_L2.group;
// The packing buffers' sizes: every Blocking keeps group·mc and group·nc within these.
constexpr int64_t PACK_A_ROWS = 576, PACK_B_COLS = 4096;

// Per thread (worker threads share the loaded library), allocated on first use and kept.
inline thread_local float* packA = nullptr;
inline thread_local float* packB = nullptr;

inline bool buffers() {
  if (!packA) packA = static_cast<float*>(std::aligned_alloc(64, PACK_A_ROWS * KC * sizeof(float)));
  if (!packB) packB = static_cast<float*>(std::aligned_alloc(64, PACK_B_COLS * KC * sizeof(float)));
  return packA && packB;
}

// Packing contiguous rows of op(A)ᵀ and op(B) a whole k row at a time (one run of memory per k, not one
// sliver or panel down all k at a time): the AVX2 build (the AVX-512 one keeps its measured packing).
#if defined(__AVX512F__)
constexpr bool ROW_PACKING = false;
#else
constexpr bool ROW_PACKING = true;
#endif

// A view of one operand: element (r, c) of op(X) is at x[r·rs + c·cs].
struct View {
  const float* x;
  int64_t rs, cs;
  float at(int64_t r, int64_t c) const { return x[r * rs + c * cs]; }
};

// kernel(kb, a, b, c, ldc, add): the MR×NR tile acc = Σ_k a[k][i]·b[k][j] (an FMA chain from zero
// in k order), then c = acc or c += acc.
using Kernel = void (*)(int64_t, const float*, const float*, float*, int64_t, bool);

template <int64_t MR, int64_t NR, Kernel kernel>
struct Blocked {
  static_assert(MC % MR == 0 && NC % NR == 0, "blocks hold whole slivers and panels");

  // dst[sliver][k][i] = op(A)(m0 + s·MR + i, k0 + k), zero past row mb.
  static void packA(const View& a, int64_t m0, int64_t mb, int64_t k0, int64_t kb, float* dst) {
    int64_t s = 0;
    if (ROW_PACKING && a.rs == 1 && mb >= MR) {  // transposed A, whole slivers: each k's mb floats read in one run
      const int64_t whole = mb / MR * MR;
      const float* r = a.x + k0 * a.cs + m0;
      for (int64_t k = 0; k < kb; k++)
        for (int64_t q = 0; q < whole; q += MR)
          std::memcpy(dst + q * kb + k * MR, r + k * a.cs + q, MR * sizeof(float));
      s = whole;
      dst += whole * kb;
    }
    for (; s < mb; s += MR) {
      const int64_t rows = mb - s < MR ? mb - s : MR;
      if (rows == MR && a.cs == 1) {  // rows of A: MR streams along k
        const float* r = a.x + (m0 + s) * a.rs + k0;
        int64_t k = 0;
#if defined(__AVX512F__)
        if constexpr (MR <= 16) {  // 16 k at a time: MR rows (and zeros) transposed, MR floats stored per k
          const __mmask16 keep = static_cast<__mmask16>((1u << MR) - 1);
          for (; k + 16 <= kb; k += 16) {
            __m512 t[16];
            for (int64_t i = 0; i < 16; i++) t[i] = i < MR ? _mm512_loadu_ps(r + i * a.rs + k) : _mm512_setzero_ps();
            transpose16(t);
            for (int64_t q = 0; q < 16; q++) _mm512_mask_storeu_ps(dst + (k + q) * MR, keep, t[q]);
          }
        }
#elif defined(__AVX2__)
        if constexpr (MR >= 4 && MR <= 8) {  // 8 k at a time: MR rows (and zeros) transposed, MR floats stored per k
          // (8 floats stored per k, the next k's store overwriting the overflow; the last k's MR through a copy)
          for (; k + 8 <= kb; k += 8) {
            __m256 t[8];
            for (int64_t i = 0; i < 8; i++) t[i] = i < MR ? _mm256_loadu_ps(r + i * a.rs + k) : _mm256_setzero_ps();
            transpose8(t);
            for (int64_t q = 0; q < 7; q++) _mm256_storeu_ps(dst + (k + q) * MR, t[q]);
            alignas(32) float last[8];
            _mm256_store_ps(last, t[7]);
            std::memcpy(dst + (k + 7) * MR, last, MR * sizeof(float));
          }
        }
#endif
        for (; k < kb; k++)
          for (int64_t i = 0; i < MR; i++) dst[k * MR + i] = r[i * a.rs + k];
      } else if (rows == MR && a.rs == 1) {  // transposed A: MR contiguous floats per k
        const float* r = a.x + k0 * a.cs + m0 + s;
        for (int64_t k = 0; k < kb; k++) std::memcpy(dst + k * MR, r + k * a.cs, MR * sizeof(float));
      } else {
        for (int64_t k = 0; k < kb; k++) {
          for (int64_t i = 0; i < rows; i++) dst[k * MR + i] = a.at(m0 + s + i, k0 + k);
          for (int64_t i = rows; i < MR; i++) dst[k * MR + i] = 0.0f;
        }
      }
      dst += kb * MR;
    }
  }

  // dst[panel][k][j] = op(B)(k0 + k, n0 + p·NR + j), zero past column nb.
  static void packB(const View& b, int64_t k0, int64_t kb, int64_t n0, int64_t nb, float* dst) {
    int64_t p = 0;
    if (ROW_PACKING && b.cs == 1 && nb >= NR) {  // B's rows, whole panels: each k's nb floats read in one run
      const int64_t whole = nb / NR * NR;
      for (int64_t k = 0; k < kb; k++) {
        const float* r = b.x + (k0 + k) * b.rs + n0;
        for (int64_t q = 0; q < whole; q += NR) std::memcpy(dst + q * kb + k * NR, r + q, NR * sizeof(float));
      }
      p = whole;
      dst += whole * kb;
    }
    for (; p < nb; p += NR) {
      const int64_t cols = nb - p < NR ? nb - p : NR;
      if (cols == NR && b.cs == 1) {
        for (int64_t k = 0; k < kb; k++) std::memcpy(dst + k * NR, b.x + (k0 + k) * b.rs + n0 + p, NR * sizeof(float));
      } else if (cols == NR && b.rs == 1) {  // transposed B: read each column along k
        int64_t k = 0;
#if defined(__AVX512F__)
        if constexpr (NR % 16 == 0) {  // 16 columns × 16 k at a time, transposed
          for (; k + 16 <= kb; k += 16)
            for (int64_t j0 = 0; j0 < NR; j0 += 16) {
              __m512 t[16];
              for (int64_t j = 0; j < 16; j++) t[j] = _mm512_loadu_ps(b.x + (n0 + p + j0 + j) * b.cs + k0 + k);
              transpose16(t);
              for (int64_t q = 0; q < 16; q++) _mm512_storeu_ps(dst + (k + q) * NR + j0, t[q]);
            }
        }
#elif defined(__AVX2__)
        if constexpr (NR % 8 == 0) {  // 8 columns × 8 k at a time, transposed
          for (; k + 8 <= kb; k += 8)
            for (int64_t j0 = 0; j0 < NR; j0 += 8) {
              __m256 t[8];
              for (int64_t j = 0; j < 8; j++) t[j] = _mm256_loadu_ps(b.x + (n0 + p + j0 + j) * b.cs + k0 + k);
              transpose8(t);
              for (int64_t q = 0; q < 8; q++) _mm256_storeu_ps(dst + (k + q) * NR + j0, t[q]);
            }
        }
#endif
        for (int64_t j = 0; j < NR; j++) {
          const float* src = b.x + (n0 + p + j) * b.cs + k0;
          for (int64_t q = k; q < kb; q++) dst[q * NR + j] = src[q];
        }
      } else {
        for (int64_t k = 0; k < kb; k++) {
          for (int64_t j = 0; j < cols; j++) dst[k * NR + j] = b.at(k0 + k, n0 + p + j);
          for (int64_t j = cols; j < NR; j++) dst[k * NR + j] = 0.0f;
        }
      }
      dst += kb * NR;
    }
  }

  // One product C (+)= op(A)·op(B), C row-major M×N with rows ldc floats apart (buffers() first), blocked by bl
  // (mc a multiple of MR, nc of NR, group·mc ≤ PACK_A_ROWS, group·nc ≤ PACK_B_COLS). Per block of nc columns and
  // group passes, B and then each mc-row block of A are packed pass by pass; each tile of C then runs the group's
  // passes in order (pass p: its sum from zero, stored, or added to C unless it is the product's first pass and not
  // accumulating), back to back (tilePasses) or one pass over the block at a time: the same arithmetic as one pass
  // over all of C at a time, whatever the blocking.
  static void gemm(const View& a, const View& b, float* c, int64_t ldc, int64_t M, int64_t K, int64_t N,
                   bool accumulate, const Blocking& bl = WIDE_L2) {
    alignas(64) float tile[MR * NR];
    if (K == 0) {
      if (!accumulate)
        for (int64_t i = 0; i < M; i++)
          for (int64_t j = 0; j < N; j++) c[i * ldc + j] = 0.0f;
      return;
    }
    const int64_t MCb = bl.mc, NCb = bl.nc, G = bl.group;
    for (int64_t jc = 0; jc < N; jc += NCb) {
      const int64_t nb = N - jc < NCb ? N - jc : NCb;
      const int64_t nbPad = (nb + NR - 1) / NR * NR;  // pass p's panels start at p·KC·nbPad
      for (int64_t pg = 0; pg < K; pg += G * KC) {
        const int64_t kg = K - pg < G * KC ? K - pg : G * KC;
        const int64_t passes = (kg + KC - 1) / KC;
        const auto depth = [&](int64_t p) { return kg - p * KC < KC ? kg - p * KC : KC; };
        for (int64_t p = 0; p < passes; p++) packB(b, pg + p * KC, depth(p), jc, nb, levanter::packB + p * KC * nbPad);
        for (int64_t ic = 0; ic < M; ic += MCb) {
          const int64_t mb = M - ic < MCb ? M - ic : MCb;
          const int64_t mbPad = (mb + MR - 1) / MR * MR;
          for (int64_t p = 0; p < passes; p++)
            packA(a, ic, mb, pg + p * KC, depth(p), levanter::packA + p * KC * mbPad);
          // pass p on the tile at (ir, jr) of this block
          const auto run = [&](int64_t p, int64_t ir, int64_t jr) {
            const int64_t rows = mb - ir < MR ? mb - ir : MR, cols = nb - jr < NR ? nb - jr : NR;
            float* ct = c + (ic + ir) * ldc + jc + jr;
            const int64_t kb = depth(p);
            const bool add = accumulate || pg + p * KC > 0;
            const float* bp = levanter::packB + p * KC * nbPad + jr * kb;
            const float* ap = levanter::packA + p * KC * mbPad + ir * kb;
            if (rows == MR && cols == NR) {
              kernel(kb, ap, bp, ct, ldc, add);
            } else {
              kernel(kb, ap, bp, tile, NR, false);
              for (int64_t i = 0; i < rows; i++)
                for (int64_t j = 0; j < cols; j++)
                  ct[i * ldc + j] = add ? ct[i * ldc + j] + tile[i * NR + j] : tile[i * NR + j];
            }
          };
          if (bl.tilePasses) {
            for (int64_t jr = 0; jr < nb; jr += NR)
              for (int64_t ir = 0; ir < mb; ir += MR)
                for (int64_t p = 0; p < passes; p++) run(p, ir, jr);
          } else {
            for (int64_t p = 0; p < passes; p++)
              for (int64_t jr = 0; jr < nb; jr += NR)
                for (int64_t ir = 0; ir < mb; ir += MR) run(p, ir, jr);
          }
        }
      }
    }
  }
};

// The small-M products (native/gemv.cc): at most SMALL_M rows of A, B read in place (no packing), the
// same bits as Blocked::gemm. smallMHandles: whether gemmSmallM takes this shape (1 to SMALL_M rows,
// K and N above 0, B with contiguous rows or contiguous columns). gemmSmallM: C (+)= op(A)·op(B), C
// rows ldc floats apart, on the pool's threads where `threaded`; false where it does not handle the
// shape or its partial-sum buffer cannot be allocated (unthreaded: before writing anything).
constexpr int64_t SMALL_M = 4;
bool smallMHandles(const View& b, int64_t M, int64_t K, int64_t N);
bool gemmSmallM(const View& a, const View& b, float* c, int64_t ldc, int64_t M, int64_t K, int64_t N,
                bool accumulate, bool threaded);
// Backs the 2 MiB pages inside [b, b + floats) with huge pages, once each (native/gemv.cc says why).
void adviseHugePages(const float* b, int64_t floats);

// The AVX-512 instantiation (native/gemm512.cc, compiled with -mavx512f): call only where the CPU
// has AVX-512F.
void gemmAvx512(const View& a, const View& b, float* c, int64_t ldc, int64_t M, int64_t K, int64_t N,
                bool accumulate);

}  // namespace levanter
