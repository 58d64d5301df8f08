// What the bf16 products share (native/gemm-bf16.cc, native/gemv-bf16.cc: compiled with -mavx512bf16;
// native/gemm-bf16-emu.cc: AVX2): float → bfloat16 rounding and the pairs along k that B is packed as. Internal
// linkage (an unnamed namespace), so each file keeps its own copy compiled with its own instruction set.
#pragma once

#include <cstdint>
#include <cstring>

#include "gemm-impl.h"

namespace levanter {
namespace {

// float → bfloat16 bits, round to nearest even; NaN → a quiet NaN (0x7fc0 with the sign), as PyTorch.
inline uint32_t bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return ((u >> 16) & 0x8000u) | 0x7fc0u;
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

// dst[p][kp][j] = pair(op(B)(2kp, n0 + p·NR + j), op(B)(2kp + 1, ·)): element 2kp in the low half of the word,
// 2kp + 1 in the high half; zero past column n0 + nb and row K.
template <int64_t NR>
void packPairsB(const View& b, int64_t n0, int64_t nb, int64_t K, int64_t Kp, uint32_t* dst) {
  for (int64_t p = 0; p < nb; p += NR) {
    const int64_t cols = nb - p < NR ? nb - p : NR;
    for (int64_t kp = 0; kp < Kp; kp++) {
      const int64_t k = 2 * kp;
      uint32_t* d = dst + kp * NR;
      if (b.cs == 1 && k + 1 < K) {
        const float* r0 = b.x + k * b.rs + n0 + p;
        const float* r1 = r0 + b.rs;
        for (int64_t j = 0; j < cols; j++) d[j] = bf16(r0[j]) | (bf16(r1[j]) << 16);
      } else {
        for (int64_t j = 0; j < cols; j++) {
          const uint32_t lo = k < K ? bf16(b.at(k, n0 + p + j)) : 0u;
          const uint32_t hi = k + 1 < K ? bf16(b.at(k + 1, n0 + p + j)) : 0u;
          d[j] = lo | (hi << 16);
        }
      }
      for (int64_t j = cols; j < NR; j++) d[j] = 0u;
    }
    dst += Kp * NR;
  }
}

}  // namespace
}  // namespace levanter
