// The batch product's AVX-512 kernel (native/gemv-batch.h): tiles of up to 8 rows × 32 columns of C in 16 zmm
// registers over a panel of B that native/gemv.cc packed into an L2 buffer, the same FMA chain per element as every
// other product (so the same bits). This file alone is compiled with -mavx512f; native/gemv.cc calls it only where
// the CPU reports AVX-512F.
#include <immintrin.h>

#include <cstdint>

#include "gemv-batch.h"

namespace levanter {

namespace {

// The mask of the first n (0–16) lanes.
inline __mmask16 firstLanes16(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
}

template <int MR>
void tile(const float* a, int64_t K, const float* bt, int64_t kb, float* c, int64_t ldc, int64_t nw, bool add,
          Ahead& ahead) {
  __m512 s0[MR], s1[MR];
  for (int i = 0; i < MR; i++) s0[i] = s1[i] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kb; k++) {
    ahead.step();
    const __m512 b0 = _mm512_load_ps(bt + 32 * k), b1 = _mm512_load_ps(bt + 32 * k + 16);
    for (int i = 0; i < MR; i++) {
      const __m512 x = _mm512_set1_ps(a[i * K + k]);
      s0[i] = _mm512_fmadd_ps(x, b0, s0[i]);
      s1[i] = _mm512_fmadd_ps(x, b1, s1[i]);
    }
  }
  const __mmask16 m0 = firstLanes16(nw), m1 = firstLanes16(nw - 16 > 0 ? nw - 16 : 0);
  for (int i = 0; i < MR; i++) {
    float* ci = c + i * ldc;
    if (add) {
      s0[i] = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, ci), s0[i]);
      s1[i] = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, ci + 16), s1[i]);
    }
    _mm512_mask_storeu_ps(ci, m0, s0[i]);
    _mm512_mask_storeu_ps(ci + 16, m1, s1[i]);
  }
}

}  // namespace

void panelAvx512(const float* a, int64_t M, int64_t K, const float* panel, int64_t kb, int64_t pw, float* c,
                 int64_t ldc, bool add, Ahead& ahead) {
  for (int64_t t = 0; t < pw; t += 32) {
    const float* bt = panel + t * kb;
    const int64_t nw = pw - t < 32 ? pw - t : 32;
    for (int64_t i = 0; i < M; i += 8) {
      const float* ai = a + i * K;
      float* ci = c + i * ldc + t;
      switch (M - i < 8 ? M - i : 8) {
        case 1: tile<1>(ai, K, bt, kb, ci, ldc, nw, add, ahead); break;
        case 2: tile<2>(ai, K, bt, kb, ci, ldc, nw, add, ahead); break;
        case 3: tile<3>(ai, K, bt, kb, ci, ldc, nw, add, ahead); break;
        case 4: tile<4>(ai, K, bt, kb, ci, ldc, nw, add, ahead); break;
        case 5: tile<5>(ai, K, bt, kb, ci, ldc, nw, add, ahead); break;
        case 6: tile<6>(ai, K, bt, kb, ci, ldc, nw, add, ahead); break;
        case 7: tile<7>(ai, K, bt, kb, ci, ldc, nw, add, ahead); break;
        default: tile<8>(ai, K, bt, kb, ci, ldc, nw, add, ahead);
      }
    }
  }
}

}  // namespace levanter
