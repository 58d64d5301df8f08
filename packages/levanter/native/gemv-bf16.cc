// levanter's bf16-weight small-M products for decoding: a weight matrix op(B) [K, N] is converted once (at load) to
// bfloat16 (round to nearest even, as PyTorch and native/gemm-bf16.cc round), so a decoded token reads half the
// bytes of the float32 weights; each product rounds the few rows of A to bf16 as well and sums in float32 with
// vdpbf16ps (two bf16 products per 32-bit lane), one fixed order per element, so the split over threads changes no
// bit. The packed layout is the product's reading order: panels of 64 columns, each panel K/2 steps of 64 columns ×
// 2 values of k (256 bytes), so a panel is one contiguous stream and the whole matrix is read start to end. This file
// alone is compiled with -mavx512bf16; callers (native/decode.cc) check the CPU first.
#include <immintrin.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "bf16-pairs.h"
#include "gemv-bf16.h"
#include "pool.h"

namespace levanter::bf16w {

namespace {

constexpr int64_t PANEL = 64;  // columns per panel: four 16-lane accumulators per row of A
constexpr int PF_BYTES = 2048;  // software prefetch distance along the stream

// Columns of panels [p0, p1) for rows i0 … i0+M-1 of the bf16 pairs of A (ap: Kp words per row).
template <int M>
void panels(const Matrix& w, const uint32_t* ap, float* c, int64_t ldc, int64_t p0, int64_t p1, bool accumulate) {
  const int64_t Kp = w.Kp;
  for (int64_t p = p0; p < p1; p++) {
    const uint16_t* src = w.data + p * Kp * 2 * PANEL;
    __m512 acc[M][4];
    for (int i = 0; i < M; i++)
      for (int q = 0; q < 4; q++) acc[i][q] = _mm512_setzero_ps();
    for (int64_t kp = 0; kp < Kp; kp++) {
      const uint16_t* s = src + kp * 2 * PANEL;
      _mm_prefetch(reinterpret_cast<const char*>(s) + PF_BYTES, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(s) + PF_BYTES + 64, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(s) + PF_BYTES + 128, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(s) + PF_BYTES + 192, _MM_HINT_T0);
      const __m512bh b0 = (__m512bh)_mm512_load_si512(s), b1 = (__m512bh)_mm512_load_si512(s + 32);
      const __m512bh b2 = (__m512bh)_mm512_load_si512(s + 64), b3 = (__m512bh)_mm512_load_si512(s + 96);
      for (int i = 0; i < M; i++) {
        const __m512bh x = (__m512bh)_mm512_set1_epi32(static_cast<int>(ap[i * Kp + kp]));
        acc[i][0] = _mm512_dpbf16_ps(acc[i][0], x, b0);
        acc[i][1] = _mm512_dpbf16_ps(acc[i][1], x, b1);
        acc[i][2] = _mm512_dpbf16_ps(acc[i][2], x, b2);
        acc[i][3] = _mm512_dpbf16_ps(acc[i][3], x, b3);
      }
    }
    for (int q = 0; q < 4; q++) {
      const int64_t j = p * PANEL + q * 16;
      if (j >= w.N) break;
      const int64_t n = w.N - j < 16 ? w.N - j : 16;
      const __mmask16 m = static_cast<__mmask16>((1u << n) - 1u);
      for (int i = 0; i < M; i++) {
        float* o = c + i * ldc + j;
        const __m512 v = accumulate ? _mm512_add_ps(_mm512_maskz_loadu_ps(m, o), acc[i][q]) : acc[i][q];
        _mm512_mask_storeu_ps(o, m, v);
      }
    }
  }
}

void rowsAnyM(const Matrix& w, const uint32_t* ap, int64_t M, float* c, int64_t ldc, int64_t p0, int64_t p1,
              bool accumulate) {
  switch (M) {
    case 1: return panels<1>(w, ap, c, ldc, p0, p1, accumulate);
    case 2: return panels<2>(w, ap, c, ldc, p0, p1, accumulate);
    case 3: return panels<3>(w, ap, c, ldc, p0, p1, accumulate);
    default: return panels<4>(w, ap, c, ldc, p0, p1, accumulate);
  }
}

}  // namespace

Matrix* pack(const float* b, int64_t rs, int64_t cs, int64_t K, int64_t N) {
  const int64_t Kp = (K + 1) / 2, P = (N + PANEL - 1) / PANEL;
  const size_t bytes = static_cast<size_t>(P * Kp * 2 * PANEL) * sizeof(uint16_t);
  // on 2 MiB pages where the kernel gives them (a stream this long spends much of its time on TLB misses otherwise)
  constexpr size_t HUGE = size_t{1} << 21;
  const size_t rounded = (bytes + HUGE - 1) & ~(HUGE - 1);
  auto* data = static_cast<uint16_t*>(std::aligned_alloc(HUGE, rounded));
  if (!data) return nullptr;
#ifdef MADV_HUGEPAGE
  madvise(data, rounded, MADV_HUGEPAGE);
#endif
  // panel by panel (threads split panels); within one, column by column so that a transposed B (rs = 1) is read
  // along its rows
  parallel_for(P, 16, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; p++) {
      uint16_t* d = data + p * Kp * 2 * PANEL;
      for (int64_t c = 0; c < PANEL; c++) {
        const int64_t j = p * PANEL + c;
        for (int64_t k = 0; k < 2 * Kp; k++)
          d[(k / 2) * 2 * PANEL + c * 2 + (k & 1)] =
              j < N && k < K ? static_cast<uint16_t>(bf16(b[k * rs + j * cs])) : uint16_t{0};
      }
    }
  });
  return new Matrix{K, N, Kp, P, data};
}

void release(Matrix* w) {
  if (!w) return;
  std::free(w->data);
  delete w;
}

bool gemv(const Matrix& w, const float* a, int64_t lda, float* c, int64_t ldc, int64_t M, bool accumulate,
          bool threaded) {
  const int64_t Kp = w.Kp;
  auto* ap = static_cast<uint32_t*>(std::malloc(static_cast<size_t>(M * Kp) * sizeof(uint32_t)));
  if (!ap) return false;
  for (int64_t i = 0; i < M; i++)
    for (int64_t kp = 0; kp < Kp; kp++) {
      const int64_t k = 2 * kp;
      const uint32_t lo = bf16(a[i * lda + k]), hi = k + 1 < w.K ? bf16(a[i * lda + k + 1]) : 0u;
      ap[i * Kp + kp] = lo | (hi << 16);
    }
  // at least ~256 KiB of weights per thread
  const int64_t grain = (int64_t{1} << 18) / (Kp * 4 * PANEL) + 1;
  const auto part = [&](int64_t p0, int64_t p1) {
    // rows four at a time; a panel read again for the next four comes from L2
    for (int64_t p = p0; p < p1; p += 8) {
      const int64_t pe = p + 8 < p1 ? p + 8 : p1;
      for (int64_t i = 0; i < M; i += 4)
        rowsAnyM(w, ap + i * Kp, M - i < 4 ? M - i : 4, c + i * ldc, ldc, p, pe, accumulate);
    }
  };
  if (threaded) parallel_for(w.panels, grain, part);
  else part(0, w.panels);
  std::free(ap);
  return true;
}

}  // namespace levanter::bf16w
