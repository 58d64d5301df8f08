// levanter's bf16 GEMM on CPUs without AVX512_BF16 (AVX2 and FMA): the same products as native/gemm-bf16.cc's
// vdpbf16ps kernel, emulated. Operands are rounded to bfloat16 and packed as the same pairs along k (B through
// native/bf16-pairs.h); each pair is widened back to float32 (a bf16 is the high half of a float32) and FMA'd into
// one float32 chain per element from zero, over the k-pairs in k order, the odd element of a pair first, with
// denormal inputs read as zero and denormal results flushed (MXCSR's DAZ and FTZ for the chain): vdpbf16ps's
// arithmetic as the Intel SDM describes it (each product of two bf16 is exact in float32, so the FMA rounds once, as
// that instruction does). So its bits should be those of LEVANTER_BF16_AMX=0 where the CPU has the instruction
// (not yet compared on such a CPU), and the split over threads changes none. No faster than float32: the FMAs are float32's, plus the widening.
#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "bf16-pairs.h"
#include "gemm-impl.h"

namespace {

using levanter::bf16;
using levanter::packPairsB;
using levanter::View;

constexpr int64_t MR = 4;
constexpr int64_t NR = 16;
constexpr int64_t NCB = 512;  // columns per packed B block, as native/gemm-bf16.cc

// A growing per-thread buffer of 4-byte elements, 64-byte aligned.
struct Buffer {
  void* p = nullptr;
  int64_t n = 0;
  void* get(int64_t want) {
    if (want <= n) return p;
    std::free(p);
    p = std::aligned_alloc(64, ((want * 4 + 63) / 64) * 64);
    n = p ? want : 0;
    return p;
  }
  ~Buffer() { std::free(p); }
};
thread_local Buffer bufA, bufB;

// The float32 value of a bfloat16's bits.
inline float widen(uint32_t h) {
  const uint32_t u = h << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// dst[s][kp][i] = {bf16(op(A)(s·MR + i, 2kp + 1)), bf16(op(A)(s·MR + i, 2kp))} as floats (the pair's odd element
// first, the order of the chain); zero past row M and column K.
void packWidenedA(const View& a, int64_t M, int64_t K, int64_t Kp, float* dst) {
  for (int64_t s = 0; s < M; s += MR) {
    const int64_t rows = M - s < MR ? M - s : MR;
    for (int64_t kp = 0; kp < Kp; kp++) {
      const int64_t k = 2 * kp;
      float* d = dst + kp * 2 * MR;
      for (int64_t i = 0; i < MR; i++) {
        const bool in = i < rows;
        d[2 * i] = in && k + 1 < K ? widen(bf16(a.at(s + i, k + 1))) : 0.0f;
        d[2 * i + 1] = in && k < K ? widen(bf16(a.at(s + i, k))) : 0.0f;
      }
    }
    dst += Kp * 2 * MR;
  }
}

// The MR×NR tile acc = Σ_kp (a_odd·b_odd then a_even·b_even), FMA chains from zero under DAZ and FTZ, then
// c = acc or c += acc (under the caller's MXCSR, as native/gemm-bf16.cc adds).
void kernel(int64_t Kp, const float* a, const uint32_t* b, float* c, int64_t ldc, bool add) {
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(csr | 0x8040u);  // FTZ (bit 15) and DAZ (bit 6)
  const __m256i high = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  __m256 acc[MR][2];
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t kp = 0; kp < Kp; kp++) {
    const __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(b));
    const __m256i w1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(b + 8));
    const __m256 odd0 = _mm256_castsi256_ps(_mm256_and_si256(w0, high));
    const __m256 odd1 = _mm256_castsi256_ps(_mm256_and_si256(w1, high));
    const __m256 even0 = _mm256_castsi256_ps(_mm256_slli_epi32(w0, 16));
    const __m256 even1 = _mm256_castsi256_ps(_mm256_slli_epi32(w1, 16));
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++) {
      const __m256 x = _mm256_broadcast_ss(a + 2 * i);
      acc[i][0] = _mm256_fmadd_ps(x, odd0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(x, odd1, acc[i][1]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++) {
      const __m256 x = _mm256_broadcast_ss(a + 2 * i + 1);
      acc[i][0] = _mm256_fmadd_ps(x, even0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(x, even1, acc[i][1]);
    }
    a += 2 * MR;
    b += NR;
  }
  _mm_setcsr(csr);
  for (int i = 0; i < MR; i++) {
    float* row = c + i * ldc;
    if (add) {
      _mm256_storeu_ps(row, _mm256_add_ps(_mm256_loadu_ps(row), acc[i][0]));
      _mm256_storeu_ps(row + 8, _mm256_add_ps(_mm256_loadu_ps(row + 8), acc[i][1]));
    } else {
      _mm256_storeu_ps(row, acc[i][0]);
      _mm256_storeu_ps(row + 8, acc[i][1]);
    }
  }
}

}  // namespace

namespace levanter {

// C (+)= bf16(op(A))·bf16(op(B)) on the calling thread, emulated (above); false when the packing buffers cannot be
// allocated.
bool gemmBf16Emulated(const View& a, const View& b, float* c, int64_t ldc, int64_t M, int64_t K, int64_t N,
                      bool accumulate) {
  if (M <= 0 || N <= 0) return true;
  if (K == 0) {
    if (!accumulate)
      for (int64_t i = 0; i < M; i++) std::memset(c + i * ldc, 0, N * sizeof(float));
    return true;
  }
  const int64_t Kp = (K + 1) / 2, slivers = (M + MR - 1) / MR;
  float* pa = static_cast<float*>(bufA.get(slivers * Kp * 2 * MR));
  uint32_t* pb = static_cast<uint32_t*>(bufB.get(Kp * NCB));
  if (!pa || !pb) return false;
  packWidenedA(a, M, K, Kp, pa);
  alignas(64) float tile[MR * NR];
  for (int64_t n0 = 0; n0 < N; n0 += NCB) {
    const int64_t nb = N - n0 < NCB ? N - n0 : NCB;
    packPairsB<NR>(b, n0, nb, K, Kp, pb);
    for (int64_t s = 0; s < slivers; s++) {
      const int64_t m0 = s * MR, rows = M - m0 < MR ? M - m0 : MR;
      const float* as = pa + s * Kp * 2 * MR;
      for (int64_t p = 0; p < nb; p += NR) {
        const int64_t cols = nb - p < NR ? nb - p : NR;
        float* cc = c + m0 * ldc + n0 + p;
        if (rows == MR && cols == NR) {
          kernel(Kp, as, pb + (p / NR) * Kp * NR, cc, ldc, accumulate);
          continue;
        }
        kernel(Kp, as, pb + (p / NR) * Kp * NR, tile, NR, false);  // an edge tile: computed whole, kept in part
        for (int64_t i = 0; i < rows; i++)
          for (int64_t j = 0; j < cols; j++)
            cc[i * ldc + j] = accumulate ? cc[i * ldc + j] + tile[i * NR + j] : tile[i * NR + j];
      }
    }
  }
  return true;
}

}  // namespace levanter
