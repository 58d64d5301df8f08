// One decode step's attention over a right-aligned KV cache, shared by native/ops-attention.cc (the tensor ops'
// decodeAttention) and native/decode.cc (the one-call GPT-2 step): one definition, the same bits on both paths.
#pragma once

#include "ops.h"

namespace levanter::ops {

// ---- attention of one new position per row over a KV cache (batched decoding) ----

inline float dotK(const float* a, const float* b, int64_t K) {
  __m256 acc = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= K; j += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), acc);
  float s = hsum(acc);
  for (; j < K; j++) s += a[j] * b[j];
  return s;
}

// o += w·x over K floats.
inline void axpyK(float w, const float* x, float* o, int64_t K) {
  const __m256 wv = _mm256_set1_ps(w);
  int64_t j = 0;
  for (; j + 8 <= K; j += 8)
    _mm256_storeu_ps(o + j, _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + j), _mm256_loadu_ps(o + j)));
  for (; j < K; j++) o[j] += w * x[j];
}

// One decode step's attention for B rows, each at its own position, and the cache grown by that
// position, in one pass: per (row, key/value head) the cached keys and values [S, K] are copied
// into the grown cache [S+1, K] with the new key and value after them (what a concat does), and
// each query head sharing that key/value head (H / Hkv of them: grouped-query attention) attends
// to the row's valid columns only: its last lengths[b] cached ones and the new one (the cache is
// right-aligned; columns before are padding). Scores q·k, the scaled softmax (softmaxRow, as the
// other attention kernels) and the weighted sum of values; out is [B, H·K], heads merged. q row b
// starts at b·qStride, the new k and v rows at b·kvStride (so the fused q/k/v projection is read
// in place).
inline void decodeAttention(const float* q, int64_t qStride, const float* k, const float* v, int64_t kvStride,
                            const float* pastK, const float* pastV, const int32_t* lengths, float* outK, float* outV,
                            float* out, int64_t B, int64_t H, int64_t Hkv, int64_t K, int64_t S, float scale) {
  const int64_t g = H / Hkv, S1 = S + 1;
  // chunks claimed in turn (Pool::parallel_chunks): at batch 1 a decode step's attention is a few µs a layer, and a
  // static split waits for a worker to wake (on a shared machine, up to a time slice) for its half of it
  parallel_chunks(B * Hkv, grainRows(2 * S1 * K), [&](int64_t i0, int64_t i1) {
    std::vector<float> p(static_cast<size_t>(S1));
    for (int64_t i = i0; i < i1; i++) {
      const int64_t b = i / Hkv, hk = i % Hkv;
      float* ck = outK + i * S1 * K;
      float* cv = outV + i * S1 * K;
      if (S > 0) {
        std::memcpy(ck, pastK + i * S * K, S * K * sizeof(float));
        std::memcpy(cv, pastV + i * S * K, S * K * sizeof(float));
      }
      std::memcpy(ck + S * K, k + b * kvStride + hk * K, K * sizeof(float));
      std::memcpy(cv + S * K, v + b * kvStride + hk * K, K * sizeof(float));
      const int64_t n = static_cast<int64_t>(lengths[b]) + 1, first = S1 - n;
      for (int64_t h = hk * g; h < (hk + 1) * g; h++) {
        const float* qh = q + b * qStride + h * K;
        for (int64_t j = 0; j < n; j++) p[j] = dotK(qh, ck + (first + j) * K, K);
        softmaxRow(p.data(), nullptr, p.data(), n, n, scale);
        float* o = out + b * H * K + h * K;
        std::memset(o, 0, K * sizeof(float));
        for (int64_t j = 0; j < n; j++) axpyK(p[j], cv + (first + j) * K, o, K);
      }
    }
  });
}

}  // namespace levanter::ops
