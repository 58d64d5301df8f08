// levanter's AVX-512 GEMM micro-kernel: a 12×32 tile of C in 24 zmm registers, 2 zmm of B and one
// broadcast of A per k, over the blocked GEMM of native/gemm-impl.h (the same packing, blocking and
// FMA order as the AVX2 kernel, so the same bits). This file alone is compiled with -mavx512f;
// native/gemm.cc calls it only where the CPU reports AVX-512F.
#include <immintrin.h>

#include "gemm-impl.h"

namespace {

constexpr int64_t MR = 12;
constexpr int64_t NR = 32;

void kernel(int64_t kb, const float* a, const float* b, float* c, int64_t ldc, bool add) {
  __m512 acc[MR][2];
#pragma GCC unroll 12
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  if (add) {  // the tile of C arrives while the FMAs run
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++) {
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 16), _MM_HINT_T0);
    }
  }
  for (int64_t k = 0; k < kb; k++) {
    const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++) {
      const __m512 x = _mm512_set1_ps(a[i]);
      acc[i][0] = _mm512_fmadd_ps(x, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(x, b1, acc[i][1]);
    }
    a += MR;
    b += NR;
  }
#pragma GCC unroll 12
  for (int i = 0; i < MR; i++) {
    float* row = c + i * ldc;
    if (add) {
      _mm512_storeu_ps(row, _mm512_add_ps(_mm512_loadu_ps(row), acc[i][0]));
      _mm512_storeu_ps(row + 16, _mm512_add_ps(_mm512_loadu_ps(row + 16), acc[i][1]));
    } else {
      _mm512_storeu_ps(row, acc[i][0]);
      _mm512_storeu_ps(row + 16, acc[i][1]);
    }
  }
}

}  // namespace

void levanter::gemmAvx512(const View& a, const View& b, float* c, int64_t ldc, int64_t M, int64_t K, int64_t N,
                          bool accumulate) {
  Blocked<MR, NR, kernel>::gemm(a, b, c, ldc, M, K, N, accumulate);
}
