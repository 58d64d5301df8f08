// What LayerNorm and GELU share between native/ops-norm.cc (the tensor ops' kernels) and native/decode.cc (the
// one-call decode step): the float64 moments of a row and GELU's gate, one definition each, so that the two paths
// compute the same bits.
#pragma once

#include "ops.h"

namespace levanter::ops {

constexpr float GELU_C = 0.7978845608028654f;  // √(2/π)
constexpr float GELU_A = 0.044715f;

// σ(2u) with u = C(x + A·x³): ½(1 + tanh(u)), the gate of GELU's tanh approximation.
inline __m256 geluGate8(__m256 x) {
  const __m256 x2 = _mm256_mul_ps(x, x);
  const __m256 u = _mm256_mul_ps(_mm256_mul_ps(x, _mm256_fmadd_ps(x2, _mm256_set1_ps(GELU_A), _mm256_set1_ps(1.0f))),
                                 _mm256_set1_ps(-2.0f * GELU_C));
  return _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), exp8(u)));
}

// Σ x over n floats in float64 (four lanes, then the lanes in order).
inline double sumD(const float* x, int64_t n) {
  __m256d a0 = _mm256_setzero_pd(), a1 = a0;
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm_loadu_ps(x + j)));
    a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm_loadu_ps(x + j + 4)));
  }
  alignas(32) double t[4];
  _mm256_store_pd(t, _mm256_add_pd(a0, a1));
  double s = (t[0] + t[1]) + (t[2] + t[3]);
  for (; j < n; j++) s += x[j];
  return s;
}

// Σ (x − mean)² over n floats in float64.
inline double sumSqDevD(const float* x, float mean, int64_t n) {
  const __m256 mv = _mm256_set1_ps(mean);
  __m256d a0 = _mm256_setzero_pd(), a1 = a0;
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 c = _mm256_sub_ps(_mm256_loadu_ps(x + j), mv);
    const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(c)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(c, 1));
    a0 = _mm256_add_pd(a0, _mm256_mul_pd(lo, lo));
    a1 = _mm256_add_pd(a1, _mm256_mul_pd(hi, hi));
  }
  alignas(32) double t[4];
  _mm256_store_pd(t, _mm256_add_pd(a0, a1));
  double s = (t[0] + t[1]) + (t[2] + t[3]);
  for (; j < n; j++) {
    const float c = x[j] - mean;
    s += static_cast<double>(c) * c;
  }
  return s;
}

}  // namespace levanter::ops
