// The blocked GEMM shared by the micro-kernels (native/gemm.cc: AVX2 6×16; native/gemm512.cc:
// AVX-512 12×32), as templates over the tile size and the micro-kernel so each instantiation is
// compiled with its own instruction set. KC, MC and NC are common to all: every element of C is
// the FMA chain over one KC-deep pass at a time, from zero, added to C in pass order, so the two
// kernels give the same bits, and so do the row and column splits over threads. Only KC fixes the
// bits: MC, NC and GROUP choose the blocks and the loop order, not the arithmetic.
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
#endif

constexpr int64_t KC = 256;
constexpr int64_t MC = 144;   // a multiple of both kernels' MR: the packed A block (MC×KC per pass) stays in L2
constexpr int64_t NC = 1024;  // a multiple of both kernels' NR: the packed B block (KC×NC per pass, 1 MiB)
// Passes packed together: a tile of C takes up to GROUP passes back to back while it sits in L1, so a product
// K ≤ GROUP·KC deep writes C once instead of reading and writing it once per pass (the head's 50257-wide C
// is 206 MB at GPT-2 small's 1024 rows).
constexpr int64_t GROUP = 4;

// Per thread (worker threads share the loaded library), allocated on first use and kept.
inline thread_local float* packA = nullptr;
inline thread_local float* packB = nullptr;

inline bool buffers() {
  if (!packA) packA = static_cast<float*>(std::aligned_alloc(64, GROUP * MC * KC * sizeof(float)));
  if (!packB) packB = static_cast<float*>(std::aligned_alloc(64, GROUP * KC * NC * sizeof(float)));
  return packA && packB;
}

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
    for (int64_t s = 0; s < mb; s += MR) {
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
    for (int64_t p = 0; p < nb; p += NR) {
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

  // One product C (+)= op(A)·op(B), C row-major M×N with rows ldc floats apart (buffers() first). Per block of NC
  // columns and GROUP passes, B and then each MC-row block of A are packed pass by pass; each tile of C then runs
  // the group's passes in order (pass p: its sum from zero, stored, or added to C unless it is the product's first
  // pass and not accumulating), the same arithmetic as one pass over all of C at a time. (Running each column of
  // tiles pass by pass instead, one B panel kept in L1, measured 2-5% slower here.)
  static void gemm(const View& a, const View& b, float* c, int64_t ldc, int64_t M, int64_t K, int64_t N,
                   bool accumulate) {
    alignas(64) float tile[MR * NR];
    if (K == 0) {
      if (!accumulate)
        for (int64_t i = 0; i < M; i++)
          for (int64_t j = 0; j < N; j++) c[i * ldc + j] = 0.0f;
      return;
    }
    for (int64_t jc = 0; jc < N; jc += NC) {
      const int64_t nb = N - jc < NC ? N - jc : NC;
      const int64_t nbPad = (nb + NR - 1) / NR * NR;  // pass p's panels start at p·KC·nbPad
      for (int64_t pg = 0; pg < K; pg += GROUP * KC) {
        const int64_t kg = K - pg < GROUP * KC ? K - pg : GROUP * KC;
        const int64_t passes = (kg + KC - 1) / KC;
        const auto depth = [&](int64_t p) { return kg - p * KC < KC ? kg - p * KC : KC; };
        for (int64_t p = 0; p < passes; p++) packB(b, pg + p * KC, depth(p), jc, nb, levanter::packB + p * KC * nbPad);
        for (int64_t ic = 0; ic < M; ic += MC) {
          const int64_t mb = M - ic < MC ? M - ic : MC;
          const int64_t mbPad = (mb + MR - 1) / MR * MR;
          for (int64_t p = 0; p < passes; p++)
            packA(a, ic, mb, pg + p * KC, depth(p), levanter::packA + p * KC * mbPad);
          for (int64_t jr = 0; jr < nb; jr += NR) {
            const int64_t cols = nb - jr < NR ? nb - jr : NR;
            for (int64_t ir = 0; ir < mb; ir += MR) {
              const int64_t rows = mb - ir < MR ? mb - ir : MR;
              float* ct = c + (ic + ir) * ldc + jc + jr;
              for (int64_t p = 0; p < passes; p++) {
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
              }
            }
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
