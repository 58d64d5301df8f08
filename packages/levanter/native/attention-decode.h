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

// The query heads hk·g … (hk+1)·g of row b attending to the n valid columns of its cache from column `first` (keys
// ck and values cv, K floats a column; the new position's last): scores q·k, the scaled softmax (softmaxRow, as the
// other attention kernels) and the weighted sum of values into out [B, H·K]; p: n floats of scratch.
inline void attendCached(const float* q, int64_t qStride, const float* ck, const float* cv, int64_t b, int64_t hk,
                         int64_t g, int64_t first, int64_t n, float* out, int64_t H, int64_t K, float scale, float* p) {
  for (int64_t h = hk * g; h < (hk + 1) * g; h++) {
    const float* qh = q + b * qStride + h * K;
    for (int64_t j = 0; j < n; j++) p[j] = dotK(qh, ck + (first + j) * K, K);
    softmaxRow(p, nullptr, p, n, n, scale);
    float* o = out + b * H * K + h * K;
    std::memset(o, 0, K * sizeof(float));
    for (int64_t j = 0; j < n; j++) axpyK(p[j], cv + (first + j) * K, o, K);
  }
}

// One decode step's attention for B rows, each at its own position, and the cache grown by that position, in one
// pass. Each (row, key/value head) of the cache is a run of columns of K floats: the past one's S cached columns
// `capPast` columns apart, the grown one's S+1 `capOut` apart (capOut ≥ S+1: room to grow into). The S columns are
// copied into the grown cache with the new key and value after them (what a concat does, at capPast = S and capOut
// = S+1); where the grown cache is the past one (outK == pastK, capOut == capPast > S: a cache that grows in place)
// only the new column is written, at column S. Each query head sharing that key/value head (H / Hkv of them:
// grouped-query attention) attends to the row's valid columns only: its last lengths[b] cached ones and the new one
// (the cache is right-aligned; columns before are padding) (attendCached: the same values in the same order either
// way, so the same bits). out is [B, H·K], heads merged. q row b starts at b·qStride, the new k and v rows at
// b·kvStride (so the fused q/k/v projection is read in place).
inline void decodeAttentionInto(const float* q, int64_t qStride, const float* k, const float* v, int64_t kvStride,
                                const float* pastK, const float* pastV, int64_t capPast, const int32_t* lengths,
                                float* outK, float* outV, int64_t capOut, float* out, int64_t B, int64_t H,
                                int64_t Hkv, int64_t K, int64_t S, float scale) {
  const int64_t g = H / Hkv, S1 = S + 1;
  const bool inPlace = outK == pastK;
  // chunks claimed in turn (Pool::parallel_chunks): at batch 1 a decode step's attention is a few µs a layer, and a
  // static split waits for a worker to wake (on a shared machine, up to a time slice) for its half of it
  parallel_chunks(B * Hkv, grainRows(2 * S1 * K), [&](int64_t i0, int64_t i1) {
    std::vector<float> p(static_cast<size_t>(S1));
    for (int64_t i = i0; i < i1; i++) {
      const int64_t b = i / Hkv, hk = i % Hkv;
      float* ck = outK + i * capOut * K;
      float* cv = outV + i * capOut * K;
      if (S > 0 && !inPlace) {
        std::memcpy(ck, pastK + i * capPast * K, S * K * sizeof(float));
        std::memcpy(cv, pastV + i * capPast * K, S * K * sizeof(float));
      }
      std::memcpy(ck + S * K, k + b * kvStride + hk * K, K * sizeof(float));
      std::memcpy(cv + S * K, v + b * kvStride + hk * K, K * sizeof(float));
      const int64_t n = static_cast<int64_t>(lengths[b]) + 1;
      attendCached(q, qStride, ck, cv, b, hk, g, S1 - n, n, out, H, K, scale, p.data());
    }
  });
}

// decodeAttentionInto from a cache [S, K] a (row, head) into a grown copy [S+1, K] a (row, head): the tensor ops'
// decodeAttention.
inline void decodeAttention(const float* q, int64_t qStride, const float* k, const float* v, int64_t kvStride,
                            const float* pastK, const float* pastV, const int32_t* lengths, float* outK, float* outV,
                            float* out, int64_t B, int64_t H, int64_t Hkv, int64_t K, int64_t S, float scale) {
  decodeAttentionInto(q, qStride, k, v, kvStride, pastK, pastV, S, lengths, outK, outV, S + 1, out, B, H, Hkv, K, S,
                      scale);
}

}  // namespace levanter::ops
