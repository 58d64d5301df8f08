// levanter's bf16 GEMM: C (+)= op(A)·op(B) with both operands rounded to bfloat16 (round to nearest
// even, NaN kept quiet: PyTorch's float→bfloat16) and the products summed in float32 by
// vdpbf16ps (_mm512_dpbf16_ps: two bf16 products per 32-bit lane per instruction, float32
// accumulation). Operands are packed as pairs along k: one 32-bit word holds elements k and k+1
// (an odd K is padded with a zero). A is packed whole in slivers of MR rows, B in blocks of NCB
// columns split into NR-column panels; a 12×32 tile of C lives in 24 zmm registers over the whole
// K, so every element of C is one chain over k-pairs in k order, whatever the tiling or the thread
// split around it (a row alone equals that row inside a larger product).
//
// Where the CPU has AMX-BF16 (and the OS grants the tile state) the same packed pairs feed tdpbf16ps on 16×16 tiles
// instead (a 32×32 block of C in four tiles; several times vdpbf16ps's speed), float32 sums again, one fixed order
// per element. This file alone is compiled with -mavx512bf16 (the AMX functions carry their own target attribute);
// native/gemm.cc calls it only where __builtin_cpu_supports("avx512bf16") says the CPU has the instructions.
#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bf16-pairs.h"
#include "gemm-impl.h"

namespace {

using levanter::bf16;
using levanter::packPairsB;
using levanter::View;

constexpr int64_t MR = 12;
constexpr int64_t NR = 32;
constexpr int64_t NCB = 512;  // columns per packed B block: K/2 × 512 words (768 KiB at K = 768) stays in L2

// A growing per-thread buffer of 32-bit words, 64-byte aligned.
struct Buffer {
  uint32_t* p = nullptr;
  int64_t n = 0;
  uint32_t* get(int64_t want) {
    if (want <= n) return p;
    std::free(p);
    const int64_t bytes = ((want * 4 + 63) / 64) * 64;
    p = static_cast<uint32_t*>(std::aligned_alloc(64, bytes));
    n = p ? want : 0;
    return p;
  }
  ~Buffer() { std::free(p); }
};
thread_local Buffer bufA, bufB;

// dst[s][kp][i] = pair(op(A)(s·MR + i, 2kp), op(A)(s·MR + i, 2kp + 1)), zero past row M and column K.
void packPairsA(const View& a, int64_t M, int64_t K, int64_t Kp, uint32_t* dst) {
  for (int64_t s = 0; s < M; s += MR) {
    const int64_t rows = M - s < MR ? M - s : MR;
    for (int64_t kp = 0; kp < Kp; kp++) {
      const int64_t k = 2 * kp;
      for (int64_t i = 0; i < rows; i++) {
        const uint32_t lo = k < K ? bf16(a.at(s + i, k)) : 0u, hi = k + 1 < K ? bf16(a.at(s + i, k + 1)) : 0u;
        dst[kp * MR + i] = lo | (hi << 16);
      }
      for (int64_t i = rows; i < MR; i++) dst[kp * MR + i] = 0u;
    }
    dst += Kp * MR;
  }
}

inline __m512bh asBf16(__m512i x) { return reinterpret_cast<__m512bh&>(x); }

// The 12×32 tile acc = Σ_kp a[kp]·b[kp] (vdpbf16ps chains from zero), then c = acc or c += acc.
void kernel(int64_t Kp, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, bool add) {
  __m512 acc[MR][2];
#pragma GCC unroll 12
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t kp = 0; kp < Kp; kp++) {
    const __m512bh b0 = asBf16(_mm512_load_si512(b)), b1 = asBf16(_mm512_load_si512(b + 16));
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++) {
      const __m512bh x = asBf16(_mm512_set1_epi32(static_cast<int>(a[i])));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], x, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], x, b1);
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

// ---- AMX (tdpbf16ps on 16×16 float32 tiles), where the CPU has AMX-BF16 and the kernel grants the tile state ----

// The CPU has AMX-TILE and AMX-BF16 (cpuid 7.0 EDX bits 24, 22) and Linux grants this process the tile data
// (arch_prctl ARCH_REQ_XCOMP_PERM), asked once; LEVANTER_BF16_AMX=0 (read at each product) keeps vdpbf16ps.
bool amxReady() {
  static const bool granted = [] {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 22)) || !(d & (1u << 24))) return false;
    constexpr long ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18;
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
  }();
  const char* env = std::getenv("LEVANTER_BF16_AMX");
  return granted && !(env && env[0] == '0');
}

struct alignas(64) TileConfig {
  uint8_t palette = 1, startRow = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

__attribute__((target("amx-tile"))) void configureTiles() {
  thread_local bool done = false;
  if (done) return;
  TileConfig cfg;
  for (int t = 0; t < 8; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  _tile_loadconfig(&cfg);
  done = true;
}

// dst[s][i][kp] = pair(op(A)(s·16 + i, 2kp), ·(2kp + 1)) for kp < Kp16, zero past row M and column K.
void packPairsA16(const View& a, int64_t M, int64_t K, int64_t Kp16, int64_t rows16, uint32_t* dst) {
  for (int64_t r = 0; r < rows16; r++) {
    uint32_t* d = dst + r * Kp16;
    if (r >= M) {
      std::memset(d, 0, Kp16 * 4);
      continue;
    }
    for (int64_t kp = 0; kp < Kp16; kp++) {
      const int64_t k = 2 * kp;
      const uint32_t lo = k < K ? bf16(a.at(r, k)) : 0u, hi = k + 1 < K ? bf16(a.at(r, k + 1)) : 0u;
      d[kp] = lo | (hi << 16);
    }
  }
}

// 32×32 blocks of C from 2×2 tiles: A rows at a (rows Kp16 words apart), B a 32-column panel (rows 32 words apart).
__attribute__((target("amx-tile,amx-bf16"))) bool gemmAmx(const View& a, const View& b, float* c, int64_t ldc,
                                                        int64_t M, int64_t K, int64_t N, bool accumulate) {
  const int64_t Kp16 = ((K + 31) / 32) * 16, rows32 = ((M + 31) / 32) * 32;
  uint32_t* pa = bufA.get(rows32 * Kp16);
  uint32_t* pb = bufB.get(Kp16 * NCB);
  if (!pa || !pb) return false;
  configureTiles();
  packPairsA16(a, M, K, Kp16, rows32, pa);
  alignas(64) float tile[32 * 32];
  for (int64_t n0 = 0; n0 < N; n0 += NCB) {
    const int64_t nb = N - n0 < NCB ? N - n0 : NCB;
    packPairsB<NR>(b, n0, nb, K, Kp16, pb);
    for (int64_t m0 = 0; m0 < M; m0 += 32) {
      const int64_t rows = M - m0 < 32 ? M - m0 : 32;
      const uint32_t* a0 = pa + m0 * Kp16;
      const uint32_t* a1 = a0 + 16 * Kp16;
      for (int64_t p = 0; p < nb; p += NR) {
        const int64_t cols = nb - p < NR ? nb - p : NR;
        const uint32_t* bp = pb + (p / NR) * Kp16 * NR;
        const bool whole = rows == 32 && cols == 32;
        float* out = whole ? c + m0 * ldc + n0 + p : tile;
        const int64_t ld = (whole ? ldc : 32) * 4;
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int64_t kb = 0; kb < Kp16; kb += 16) {
          _tile_loadd(4, a0 + kb, Kp16 * 4);
          _tile_loadd(5, a1 + kb, Kp16 * 4);
          _tile_loadd(6, bp + kb * NR, NR * 4);
          _tile_loadd(7, bp + kb * NR + 16, NR * 4);
          _tile_dpbf16ps(0, 4, 6);
          _tile_dpbf16ps(1, 4, 7);
          _tile_dpbf16ps(2, 5, 6);
          _tile_dpbf16ps(3, 5, 7);
        }
        if (whole && !accumulate) {
          _tile_stored(0, out, ld);
          _tile_stored(1, out + 16, ld);
          _tile_stored(2, out + 16 * ldc, ld);
          _tile_stored(3, out + 16 * ldc + 16, ld);
          continue;
        }
        _tile_stored(0, tile, 128);
        _tile_stored(1, tile + 16, 128);
        _tile_stored(2, tile + 16 * 32, 128);
        _tile_stored(3, tile + 16 * 32 + 16, 128);
        float* cc = c + m0 * ldc + n0 + p;
        for (int64_t i = 0; i < rows; i++)
          for (int64_t j = 0; j < cols; j++)
            cc[i * ldc + j] = accumulate ? cc[i * ldc + j] + tile[i * 32 + j] : tile[i * 32 + j];
      }
    }
  }
  return true;
}

}  // namespace

namespace levanter {

bool bf16UsesAmx() { return amxReady(); }

// C (+)= bf16(op(A))·bf16(op(B)) on the calling thread, C row-major M×N with rows ldc floats apart; false
// when the packing buffers cannot be allocated.
bool gemmBf16(const View& a, const View& b, float* c, int64_t ldc, int64_t M, int64_t K, int64_t N, bool accumulate) {
  if (M <= 0 || N <= 0) return true;
  if (K == 0) {
    if (!accumulate)
      for (int64_t i = 0; i < M; i++) std::memset(c + i * ldc, 0, N * sizeof(float));
    return true;
  }
  if (amxReady()) return gemmAmx(a, b, c, ldc, M, K, N, accumulate);
  const int64_t Kp = (K + 1) / 2, slivers = (M + MR - 1) / MR;
  uint32_t* pa = bufA.get(slivers * Kp * MR);
  uint32_t* pb = bufB.get(Kp * NCB);
  if (!pa || !pb) return false;
  packPairsA(a, M, K, Kp, pa);
  alignas(64) float tile[MR * NR];
  for (int64_t n0 = 0; n0 < N; n0 += NCB) {
    const int64_t nb = N - n0 < NCB ? N - n0 : NCB;
    packPairsB<NR>(b, n0, nb, K, Kp, pb);
    for (int64_t s = 0; s < slivers; s++) {
      const int64_t m0 = s * MR, rows = M - m0 < MR ? M - m0 : MR;
      const uint32_t* as = pa + s * Kp * MR;
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
