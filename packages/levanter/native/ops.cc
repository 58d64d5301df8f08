// levanter's fused native kernels: the work of a training step outside matrix products, each one
// pass (or two) over memory where tfjs runs several kernels: LayerNorm and GELU (tanh) forward and
// backward, the causal softmax of attention and its backward, causal self-attention straight from
// the fused q/k/v projection (on the native GEMM), cross-entropy with its gradient in
// the same pass, the bias/gain gradient (a column sum), and AdamW. They read and write float32
// typed arrays in place (views of the wasm backend's heap, or the optimizer's own arrays) and run
// on native/pool.h's threads, split by rows: every output element is computed by one thread in one
// fixed order, and sums over rows go through fixed blocks of rows added in order, so the results do
// not depend on the thread count.
//
// Compiled with -ffp-contract=off: AdamW's float64 arithmetic then rounds exactly as levanter's JS
// version does (same operations, same order), so switching between the two changes no bit.
#include <immintrin.h>
#include <node_api.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gemm.h"
#include "pool.h"

namespace {

using levanter::parallel_for;

// ---- exp and sigmoid on 8 floats (Cephes' expf: range reduction by ln 2, degree-5 polynomial) ----

// Below −88.38 (where float32's exp leaves the normal range) the result is exactly 0: masked
// attention scores (−∞, or −1e9 added) then weigh nothing at all.
inline __m256 exp8(__m256 x) {
  const __m256 hi = _mm256_set1_ps(88.3762626647949f), lo = _mm256_set1_ps(-88.3762626647949f);
  const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  x = _mm256_sub_ps(x, _mm256_mul_ps(fx, _mm256_set1_ps(0.693359375f)));
  x = _mm256_sub_ps(x, _mm256_mul_ps(fx, _mm256_set1_ps(-2.12194440e-4f)));
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(under, _mm256_mul_ps(y, _mm256_castsi256_ps(e)));
}

inline float exp1(float x) {
  alignas(32) float v[8] = {x};
  _mm256_store_ps(v, exp8(_mm256_load_ps(v)));
  return v[0];
}

constexpr float GELU_C = 0.7978845608028654f;  // √(2/π)
constexpr float GELU_A = 0.044715f;

// σ(2u) with u = C(x + A·x³): ½(1 + tanh(u)), the gate of GELU's tanh approximation.
inline __m256 geluGate8(__m256 x) {
  const __m256 x2 = _mm256_mul_ps(x, x);
  const __m256 u = _mm256_mul_ps(_mm256_mul_ps(x, _mm256_fmadd_ps(x2, _mm256_set1_ps(GELU_A), _mm256_set1_ps(1.0f))),
                                 _mm256_set1_ps(-2.0f * GELU_C));
  return _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), exp8(u)));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Rows of work handed to one thread at least (a chunk below ~64 KiB is not worth a wake-up).
inline int64_t grainRows(int64_t rowLength) {
  const int64_t g = 16384 / (rowLength > 0 ? rowLength : 1);
  return g > 1 ? g : 1;
}

// Sums over rows go through blocks of this many rows (float64 partials added in block order).
constexpr int64_t BLOCK_ROWS = 32;

// ---- GELU (tanh) ----

void geluForward(const float* x, float* y, int64_t n) {
  parallel_for((n + 7) / 8, 2048, [&](int64_t b, int64_t e) {
    for (int64_t i = b * 8; i < e * 8; i += 8) {
      if (i + 8 <= n) {
        const __m256 v = _mm256_loadu_ps(x + i);
        _mm256_storeu_ps(y + i, _mm256_mul_ps(v, geluGate8(v)));
      } else {
        for (int64_t j = i; j < n; j++) {
          alignas(32) float t[8] = {x[j]};
          _mm256_store_ps(t, geluGate8(_mm256_load_ps(t)));
          y[j] = x[j] * t[0];
        }
      }
    }
  });
}

// d/dx x·σ(2u) = σ·(1 + x·(1 − σ)·(2C + 6AC·x²))
void geluBackward(const float* x, const float* dy, float* dx, int64_t n) {
  const __m256 k1 = _mm256_set1_ps(6.0f * GELU_A * GELU_C), k2 = _mm256_set1_ps(2.0f * GELU_C);
  const __m256 one = _mm256_set1_ps(1.0f);
  const auto grad = [&](__m256 v, __m256 d) {
    const __m256 s = geluGate8(v);
    const __m256 du = _mm256_fmadd_ps(_mm256_mul_ps(v, v), k1, k2);
    const __m256 inner = _mm256_fmadd_ps(_mm256_mul_ps(v, _mm256_sub_ps(one, s)), du, one);
    return _mm256_mul_ps(d, _mm256_mul_ps(s, inner));
  };
  parallel_for((n + 7) / 8, 2048, [&](int64_t b, int64_t e) {
    for (int64_t i = b * 8; i < e * 8; i += 8) {
      if (i + 8 <= n) {
        _mm256_storeu_ps(dx + i, grad(_mm256_loadu_ps(x + i), _mm256_loadu_ps(dy + i)));
      } else {
        for (int64_t j = i; j < n; j++) {
          alignas(32) float t[8] = {x[j]}, d[8] = {dy[j]};
          _mm256_store_ps(t, grad(_mm256_load_ps(t), _mm256_load_ps(d)));
          dx[j] = t[0];
        }
      }
    }
  });
}

// ---- LayerNorm over rows of D ----

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

void layerNormForward(const float* x, const float* g, const float* b, float eps, float* y, float* xhat, float* rstd,
                      int64_t rows, int64_t D) {
  parallel_for(rows, grainRows(D), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
      const float* xr = x + r * D;
      const float mean = static_cast<float>(sumD(xr, D) / D);
      const float rs = static_cast<float>(1.0 / std::sqrt(sumSqDevD(xr, mean, D) / D + eps));
      rstd[r] = rs;
      float* hr = xhat + r * D;
      float* yr = y + r * D;
      const __m256 mv = _mm256_set1_ps(mean), rv = _mm256_set1_ps(rs);
      int64_t j = 0;
      for (; j + 8 <= D; j += 8) {
        const __m256 h = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + j), mv), rv);
        _mm256_storeu_ps(hr + j, h);
        _mm256_storeu_ps(yr + j, _mm256_add_ps(_mm256_mul_ps(h, _mm256_loadu_ps(g + j)), _mm256_loadu_ps(b + j)));
      }
      for (; j < D; j++) {
        const float h = (xr[j] - mean) * rs;
        hr[j] = h;
        yr[j] = h * g[j] + b[j];
      }
    }
  });
}

// dx = rstd·(dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂)) with dx̂ = dy·g; dg = Σ dy·x̂ and db = Σ dy over rows.
void layerNormBackward(const float* dy, const float* xhat, const float* rstd, const float* g, float* dx, float* dg,
                       float* db, int64_t rows, int64_t D) {
  const int64_t blocks = (rows + BLOCK_ROWS - 1) / BLOCK_ROWS;
  std::vector<double> pg(blocks * D, 0.0), pb(blocks * D, 0.0);
  parallel_for(blocks, 1, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; k++) {
      double* sg = pg.data() + k * D;
      double* sb = pb.data() + k * D;
      const int64_t end = (k + 1) * BLOCK_ROWS < rows ? (k + 1) * BLOCK_ROWS : rows;
      for (int64_t r = k * BLOCK_ROWS; r < end; r++) {
        const float* d = dy + r * D;
        const float* h = xhat + r * D;
        __m256 a1 = _mm256_setzero_ps(), a2 = a1;
        int64_t j = 0;
        for (; j + 8 <= D; j += 8) {
          const __m256 dv = _mm256_loadu_ps(d + j), hv = _mm256_loadu_ps(h + j);
          const __m256 dxh = _mm256_mul_ps(dv, _mm256_loadu_ps(g + j));
          a1 = _mm256_add_ps(a1, dxh);
          a2 = _mm256_add_ps(a2, _mm256_mul_ps(dxh, hv));
          const __m256d dlo = _mm256_cvtps_pd(_mm256_castps256_ps128(dv)), dhi = _mm256_cvtps_pd(_mm256_extractf128_ps(dv, 1));
          const __m256d hlo = _mm256_cvtps_pd(_mm256_castps256_ps128(hv)), hhi = _mm256_cvtps_pd(_mm256_extractf128_ps(hv, 1));
          _mm256_storeu_pd(sg + j, _mm256_add_pd(_mm256_loadu_pd(sg + j), _mm256_mul_pd(dlo, hlo)));
          _mm256_storeu_pd(sg + j + 4, _mm256_add_pd(_mm256_loadu_pd(sg + j + 4), _mm256_mul_pd(dhi, hhi)));
          _mm256_storeu_pd(sb + j, _mm256_add_pd(_mm256_loadu_pd(sb + j), dlo));
          _mm256_storeu_pd(sb + j + 4, _mm256_add_pd(_mm256_loadu_pd(sb + j + 4), dhi));
        }
        float m1 = hsum(a1), m2 = hsum(a2);
        for (; j < D; j++) {
          const float dxh = d[j] * g[j];
          m1 += dxh;
          m2 += dxh * h[j];
          sg[j] += static_cast<double>(d[j]) * h[j];
          sb[j] += d[j];
        }
        m1 /= D;
        m2 /= D;
        const float rr = rstd[r];
        const __m256 m1v = _mm256_set1_ps(m1), m2v = _mm256_set1_ps(m2), rv = _mm256_set1_ps(rr);
        float* o = dx + r * D;
        j = 0;
        for (; j + 8 <= D; j += 8) {
          const __m256 t = _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(d + j), _mm256_loadu_ps(g + j)), m1v);
          _mm256_storeu_ps(o + j, _mm256_mul_ps(_mm256_sub_ps(t, _mm256_mul_ps(_mm256_loadu_ps(h + j), m2v)), rv));
        }
        for (; j < D; j++) o[j] = (d[j] * g[j] - m1 - h[j] * m2) * rr;
      }
    }
  });
  for (int64_t j = 0; j < D; j++) {
    double sg = 0, sb = 0;
    for (int64_t k = 0; k < blocks; k++) {
      sg += pg[k * D + j];
      sb += pb[k * D + j];
    }
    dg[j] = static_cast<float>(sg);
    db[j] = static_cast<float>(sb);
  }
}

// ---- sum over rows (a bias's or a gain's gradient) ----

void columnSum(const float* x, float* out, int64_t rows, int64_t D) {
  const int64_t blocks = (rows + BLOCK_ROWS - 1) / BLOCK_ROWS;
  std::vector<double> part(blocks * D, 0.0);
  parallel_for(blocks, 1, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; k++) {
      double* s = part.data() + k * D;
      const int64_t end = (k + 1) * BLOCK_ROWS < rows ? (k + 1) * BLOCK_ROWS : rows;
      for (int64_t r = k * BLOCK_ROWS; r < end; r++)
        for (int64_t j = 0; j < D; j++) s[j] += x[r * D + j];
    }
  });
  for (int64_t j = 0; j < D; j++) {
    double s = 0;
    for (int64_t k = 0; k < blocks; k++) s += part[k * D + j];
    out[j] = static_cast<float>(s);
  }
}

// ---- softmax over rows of S (attention), scaled, optionally causal ----

// y = softmax(s) over a row of S scores s_j = scale·x_j + bias_j, where the first n entries are
// seen and the rest masked (probability exactly 0); `bias` may be null (0). Masked or not, the row
// is reduced in the same lanes and order, and a masked entry adds exactly 0: a row masked by
// position (n) and the same row masked by an additive −1e9 bias give the same bits.
void softmaxRow(const float* xr, const float* bias, float* yr, int64_t n, int64_t S, float scale) {
  const __m256 sv = _mm256_set1_ps(scale), ninf = _mm256_set1_ps(-INFINITY);
  const __m256 lane = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
  const auto score = [&](int64_t j) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(xr + j), sv);
    if (bias) v = _mm256_add_ps(v, _mm256_loadu_ps(bias + j));
    // lanes at or past n are masked
    const __m256 seen = _mm256_cmp_ps(_mm256_add_ps(lane, _mm256_set1_ps(static_cast<float>(j))),
                                      _mm256_set1_ps(static_cast<float>(n)), _CMP_LT_OQ);
    return _mm256_blendv_ps(ninf, v, seen);
  };
  const auto score1 = [&](int64_t j) { return j < n ? xr[j] * scale + (bias ? bias[j] : 0.0f) : -INFINITY; };
  const int64_t full = S - S % 8;
  __m256 mv = ninf;
  for (int64_t j = 0; j < full; j += 8) mv = _mm256_max_ps(mv, score(j));
  float m = hmax(mv);
  for (int64_t j = full; j < S; j++) m = score1(j) > m ? score1(j) : m;
  const __m256 msv = _mm256_set1_ps(m);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t j = 0; j < full; j += 8) {
    const __m256 e = exp8(_mm256_sub_ps(score(j), msv));
    _mm256_storeu_ps(yr + j, e);
    acc = _mm256_add_ps(acc, e);
  }
  float sum = hsum(acc);
  for (int64_t j = full; j < S; j++) {
    yr[j] = exp1(score1(j) - m);
    sum += yr[j];
  }
  const __m256 iv = _mm256_set1_ps(1.0f / sum);
  for (int64_t j = 0; j < full; j += 8) _mm256_storeu_ps(yr + j, _mm256_mul_ps(_mm256_loadu_ps(yr + j), iv));
  for (int64_t j = full; j < S; j++) yr[j] *= 1.0f / sum;
}

// dx = scale·y·(dy − Σ dy·y) over the first n of a row of S entries, 0 for the rest (where y is 0:
// the masked keys; dy there is not read). dx may be dy.
void softmaxGradRow(const float* yr, const float* dr, float* o, int64_t n, int64_t S, float scale) {
  __m256 acc = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(yr + j), _mm256_loadu_ps(dr + j), acc);
  float dot = hsum(acc);
  for (; j < n; j++) dot += yr[j] * dr[j];
  const __m256 dv = _mm256_set1_ps(dot), sv = _mm256_set1_ps(scale);
  j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(yr + j), _mm256_sub_ps(_mm256_loadu_ps(dr + j), dv));
    _mm256_storeu_ps(o + j, _mm256_mul_ps(v, sv));
  }
  for (; j < n; j++) o[j] = yr[j] * (dr[j] - dot) * scale;
  for (j = n; j < S; j++) o[j] = 0.0f;
}

// Row r is query t = r mod T at absolute position offset + t: with `causal` it sees keys 0…offset+t
// and the rest get probability 0 (as an additive −1e9 mask gives in float32).
void softmaxForward(const float* x, float* y, int64_t rows, int64_t S, int64_t T, int64_t offset, float scale,
                    bool causal) {
  parallel_for(rows, grainRows(S), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
      const int64_t n = causal ? offset + r % T + 1 : S;
      softmaxRow(x + r * S, nullptr, y + r * S, n < S ? n : S, S, scale);
    }
  });
}

// The same over x [B, H, T, S] with an additive bias [B, 1, T, S] shared by the heads.
void softmaxBiasForward(const float* x, const float* bias, float* y, int64_t rows, int64_t S, int64_t T, int64_t H,
                        float scale) {
  parallel_for(rows, grainRows(S), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
      const int64_t b = r / (H * T), t = r % T;
      softmaxRow(x + r * S, bias + (b * T + t) * S, y + r * S, S, S, scale);
    }
  });
}

void softmaxBackward(const float* y, const float* dy, float* dx, int64_t rows, int64_t S, float scale) {
  parallel_for(rows, grainRows(S), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) softmaxGradRow(y + r * S, dy + r * S, dx + r * S, S, S, scale);
  });
}

// ---- causal self-attention straight from the fused q/k/v projection ----

// Rows of queries per block: a block's scores need only the keys up to its last row, so the
// products skip the masked upper triangle (about 40% of the work at T 128). A multiple of both
// kernels' column panels (16, 32).
constexpr int64_t ATTN_ROWS = 32;

// qkv [B, T, 3D] (q, k, v side by side, head h in columns h·K…h·K+K−1 of each) → out [B, T, D]
// (heads merged), keeping the probabilities P [B, H, T, T] for the backward pass. Per (batch,
// head) and block of query rows: S = Q·Kᵀ over the keys the block sees, P = softmax(scale·S)
// causally (0 beyond), O = P·V, each product on the native GEMM reading the strided heads in
// place: no split, no head transposes, no merge. Skipping keys a row never sees only drops terms
// that are exactly 0, so every value equals the full products' (decoding relies on it).
bool attentionForward(const float* qkv, float* out, float* P, int64_t B, int64_t T, int64_t H, int64_t K,
                      float scale) {
  const int64_t D = H * K;
  std::atomic<bool> ok{true};
  parallel_for(B * H, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1 && ok; i++) {
      const int64_t b = i / H, h = i % H;
      const float* q = qkv + b * T * 3 * D + h * K;
      const float *k = q + D, *v = q + 2 * D;
      float* p = P + i * T * T;
      for (int64_t r0 = 0; r0 < T; r0 += ATTN_ROWS) {
        const int64_t r1 = r0 + ATTN_ROWS < T ? r0 + ATTN_ROWS : T;
        if (!levanter::gemmOnThisThread(q + r0 * 3 * D, 3 * D, 1, k, 1, 3 * D, p + r0 * T, T, r1 - r0, K, r1))
          ok = false;
        for (int64_t t = r0; t < r1; t++) softmaxRow(p + t * T, nullptr, p + t * T, t + 1, T, scale);
        float* o = out + (b * T + r0) * D + h * K;
        if (!levanter::gemmOnThisThread(p + r0 * T, T, 1, v, 3 * D, 1, o, D, r1 - r0, r1, K)) ok = false;
      }
    }
  });
  return ok;
}

// The gradient of attentionForward: dqkv [B, T, 3D] from dout [B, T, D], per (batch, head)
// dP = dO·Vᵀ and dS = softmax backward by blocks of query rows (keys up to the block's last), then
// dQ = dS·K over the keys each block sees, and dK = dSᵀ·Q, dV = Pᵀ·dO by blocks of keys over the
// queries that see them.
bool attentionBackward(const float* qkv, const float* P, const float* dout, float* dqkv, int64_t B, int64_t T,
                       int64_t H, int64_t K, float scale) {
  const int64_t D = H * K;
  std::atomic<bool> ok{true};
  parallel_for(B * H, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> scratch(T * T);
    float* ds = scratch.data();
    for (int64_t i = i0; i < i1 && ok; i++) {
      const int64_t b = i / H, h = i % H;
      const float* q = qkv + b * T * 3 * D + h * K;
      const float *k = q + D, *v = q + 2 * D;
      const float* p = P + i * T * T;
      const float* dO = dout + b * T * D + h * K;
      float* dq = dqkv + b * T * 3 * D + h * K;
      float *dk = dq + D, *dv = dq + 2 * D;
      for (int64_t r0 = 0; r0 < T; r0 += ATTN_ROWS) {
        const int64_t r1 = r0 + ATTN_ROWS < T ? r0 + ATTN_ROWS : T;
        if (!levanter::gemmOnThisThread(dO + r0 * D, D, 1, v, 1, 3 * D, ds + r0 * T, T, r1 - r0, K, r1)) ok = false;
        for (int64_t t = r0; t < r1; t++) softmaxGradRow(p + t * T, ds + t * T, ds + t * T, t + 1, T, scale);
        if (!levanter::gemmOnThisThread(ds + r0 * T, T, 1, k, 3 * D, 1, dq + r0 * 3 * D, 3 * D, r1 - r0, r1, K))
          ok = false;
      }
      for (int64_t s0 = 0; s0 < T; s0 += ATTN_ROWS) {
        const int64_t s1 = s0 + ATTN_ROWS < T ? s0 + ATTN_ROWS : T;
        const int64_t from = s0 * T + s0;  // (query s0, key s0): earlier queries do not see these keys
        if (!levanter::gemmOnThisThread(ds + from, 1, T, q + s0 * 3 * D, 3 * D, 1, dk + s0 * 3 * D, 3 * D, s1 - s0,
                                        T - s0, K))
          ok = false;
        if (!levanter::gemmOnThisThread(p + from, 1, T, dO + s0 * D, D, 1, dv + s0 * 3 * D, 3 * D, s1 - s0, T - s0, K))
          ok = false;
      }
    }
  });
  return ok;
}

// ---- cross-entropy: Σ mask·(lse − logit[target]) / denom, and its gradient in the same pass ----

double crossEntropy(const float* logits, const int32_t* targets, const float* mask, int64_t rows, int64_t V,
                    double denom, float* grad) {
  const int64_t blocks = (rows + BLOCK_ROWS - 1) / BLOCK_ROWS;
  std::vector<double> part(blocks, 0.0);
  parallel_for(blocks, 1, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; k++) {
      const int64_t end = (k + 1) * BLOCK_ROWS < rows ? (k + 1) * BLOCK_ROWS : rows;
      double loss = 0;
      for (int64_t r = k * BLOCK_ROWS; r < end; r++) {
        const float* xr = logits + r * V;
        float* gr = grad + r * V;
        __m256 mv = _mm256_set1_ps(-INFINITY);
        int64_t j = 0;
        for (; j + 8 <= V; j += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(xr + j));
        float m = hmax(mv);
        for (; j < V; j++) m = xr[j] > m ? xr[j] : m;
        const __m256 msv = _mm256_set1_ps(m);
        __m256 acc = _mm256_setzero_ps();
        j = 0;
        for (; j + 8 <= V; j += 8) {
          const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(xr + j), msv));
          _mm256_storeu_ps(gr + j, e);
          acc = _mm256_add_ps(acc, e);
        }
        float sum = hsum(acc);
        for (; j < V; j++) {
          gr[j] = exp1(xr[j] - m);
          sum += gr[j];
        }
        const int32_t t = targets[r];
        const float w = static_cast<float>(mask[r] / denom);
        if (mask[r] != 0.0f) loss += mask[r] * (static_cast<double>(m) + std::log(static_cast<double>(sum)) - xr[t]);
        const __m256 sc = _mm256_set1_ps(w / sum);
        j = 0;
        for (; j + 8 <= V; j += 8) _mm256_storeu_ps(gr + j, _mm256_mul_ps(_mm256_loadu_ps(gr + j), sc));
        for (; j < V; j++) gr[j] *= w / sum;
        gr[t] -= w;
      }
      part[k] = loss;
    }
  });
  double total = 0;
  for (int64_t k = 0; k < blocks; k++) total += part[k];
  return total / denom;
}

// ---- AdamW (float64 arithmetic, float32 storage; the same operations in the same order as JS) ----

void adamw(const float* g, float* m, float* v, const float* p, float* out, int64_t n, double scale, double b1,
           double c1, double b2, double c2, double keep, double step, double rbc2, double eps) {
  parallel_for(n, 8192, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; i++) {
      const double gi = g[i] * scale;
      const double mi = b1 * m[i] + c1 * gi;  // the stored moments round to float32, the update does not
      const double vi = b2 * v[i] + c2 * gi * gi;
      m[i] = static_cast<float>(mi);
      v[i] = static_cast<float>(vi);
      out[i] = static_cast<float>(p[i] * keep - (step * mi) / (std::sqrt(vi * rbc2) + eps));
    }
  });
}

double sumSquares(const float* g, int64_t n) {
  const int64_t blocks = (n + 65535) / 65536;
  std::vector<double> part(blocks, 0.0);
  parallel_for(blocks, 1, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; k++) {
      const int64_t end = (k + 1) * 65536 < n ? (k + 1) * 65536 : n;
      __m256d a0 = _mm256_setzero_pd(), a1 = a0;
      int64_t i = k * 65536;
      for (; i + 8 <= end; i += 8) {
        const __m256d x0 = _mm256_cvtps_pd(_mm_loadu_ps(g + i)), x1 = _mm256_cvtps_pd(_mm_loadu_ps(g + i + 4));
        a0 = _mm256_add_pd(a0, _mm256_mul_pd(x0, x0));
        a1 = _mm256_add_pd(a1, _mm256_mul_pd(x1, x1));
      }
      alignas(32) double t[4];
      _mm256_store_pd(t, _mm256_add_pd(a0, a1));
      double s = (t[0] + t[1]) + (t[2] + t[3]);
      for (; i < end; i++) s += static_cast<double>(g[i]) * g[i];
      part[k] = s;
    }
  });
  double s = 0;
  for (double x : part) s += x;
  return s;
}

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
  for (; j + 8 <= K; j += 8) _mm256_storeu_ps(o + j, _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + j), _mm256_loadu_ps(o + j)));
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
void decodeAttention(const float* q, int64_t qStride, const float* k, const float* v, int64_t kvStride,
                     const float* pastK, const float* pastV, const int32_t* lengths, float* outK, float* outV,
                     float* out, int64_t B, int64_t H, int64_t Hkv, int64_t K, int64_t S, float scale) {
  const int64_t g = H / Hkv, S1 = S + 1;
  parallel_for(B * Hkv, grainRows(2 * S1 * K), [&](int64_t i0, int64_t i1) {
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

// ---- N-API ----

napi_value fail(napi_env env, const char* msg) {
  napi_throw_range_error(env, "LEVANTER_NATIVE_OPS", msg);
  return nullptr;
}

struct Args {
  napi_env env;
  napi_value argv[16];
  size_t argc = 16;
  bool ok = true;
  const char* name;

  Args(napi_env e, napi_callback_info info, const char* n, size_t want) : env(e), name(n) {
    napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
    if (argc != want) ok = false;
  }

  template <typename T>
  T* array(size_t i, napi_typedarray_type type, int64_t* length) {
    napi_typedarray_type t;
    size_t len = 0;
    void* data = nullptr;
    napi_value buf;
    size_t off = 0;
    if (!ok || i >= argc || napi_get_typedarray_info(env, argv[i], &t, &len, &data, &buf, &off) != napi_ok ||
        t != type) {
      ok = false;
      return nullptr;
    }
    *length = static_cast<int64_t>(len);
    return static_cast<T*>(data);
  }
  float* f32(size_t i, int64_t* n) { return array<float>(i, napi_float32_array, n); }
  int32_t* i32(size_t i, int64_t* n) { return array<int32_t>(i, napi_int32_array, n); }

  double number(size_t i) {
    double d = 0;
    if (!ok || i >= argc || napi_get_value_double(env, argv[i], &d) != napi_ok) ok = false;
    return d;
  }
  int64_t integer(size_t i) {
    const double d = number(i);
    if (!(d >= 0) || d > 9007199254740991.0 || d != std::floor(d)) ok = false;
    return ok ? static_cast<int64_t>(d) : 0;
  }
  bool flag(size_t i) {
    bool b = false;
    if (!ok || i >= argc || napi_get_value_bool(env, argv[i], &b) != napi_ok) ok = false;
    return b;
  }
  // The check every kernel ends its argument reading with: a wrong type or a length that does not fit.
  bool check(bool sizes) {
    if (!ok) {
      fail(env, name);
      return false;
    }
    if (!sizes) {
      napi_throw_range_error(env, "LEVANTER_NATIVE_OPS", "array lengths do not match the sizes given");
      return false;
    }
    return true;
  }
};

napi_value number(napi_env env, double x) {
  napi_value r;
  napi_create_double(env, x, &r);
  return r;
}

napi_value GeluForward(napi_env env, napi_callback_info info) {
  Args a(env, info, "geluForward(x: Float32Array, y: Float32Array)", 2);
  int64_t nx, ny;
  const float* x = a.f32(0, &nx);
  float* y = a.f32(1, &ny);
  if (a.check(nx == ny)) geluForward(x, y, nx);
  return nullptr;
}

napi_value GeluBackward(napi_env env, napi_callback_info info) {
  Args a(env, info, "geluBackward(x, dy, dx: Float32Array)", 3);
  int64_t nx, nd, no;
  const float* x = a.f32(0, &nx);
  const float* dy = a.f32(1, &nd);
  float* dx = a.f32(2, &no);
  if (a.check(nx == nd && nx == no)) geluBackward(x, dy, dx, nx);
  return nullptr;
}

napi_value LayerNormForward(napi_env env, napi_callback_info info) {
  Args a(env, info, "layerNormForward(x, g, b: Float32Array, eps: number, y, xhat, rstd: Float32Array)", 7);
  int64_t nx, ng, nb, ny, nh, nr;
  const float* x = a.f32(0, &nx);
  const float* g = a.f32(1, &ng);
  const float* b = a.f32(2, &nb);
  const double eps = a.number(3);
  float* y = a.f32(4, &ny);
  float* h = a.f32(5, &nh);
  float* r = a.f32(6, &nr);
  if (a.check(ng > 0 && nb == ng && nx == nr * ng && ny == nx && nh == nx))
    layerNormForward(x, g, b, static_cast<float>(eps), y, h, r, nr, ng);
  return nullptr;
}

napi_value LayerNormBackward(napi_env env, napi_callback_info info) {
  Args a(env, info, "layerNormBackward(dy, xhat, rstd, g, dx, dg, db: Float32Array)", 7);
  int64_t nd, nh, nr, ng, nx, ndg, ndb;
  const float* dy = a.f32(0, &nd);
  const float* h = a.f32(1, &nh);
  const float* r = a.f32(2, &nr);
  const float* g = a.f32(3, &ng);
  float* dx = a.f32(4, &nx);
  float* dg = a.f32(5, &ndg);
  float* db = a.f32(6, &ndb);
  if (a.check(ng > 0 && nd == nr * ng && nh == nd && nx == nd && ndg == ng && ndb == ng))
    layerNormBackward(dy, h, r, g, dx, dg, db, nr, ng);
  return nullptr;
}

napi_value ColumnSum(napi_env env, napi_callback_info info) {
  Args a(env, info, "columnSum(x: Float32Array, out: Float32Array)", 2);
  int64_t nx, no;
  const float* x = a.f32(0, &nx);
  float* out = a.f32(1, &no);
  if (a.check(no > 0 && nx % no == 0)) columnSum(x, out, nx / no, no);
  return nullptr;
}

napi_value SoftmaxForward(napi_env env, napi_callback_info info) {
  Args a(env, info, "softmaxForward(x, y: Float32Array, S, T, offset, scale: number, causal: boolean)", 7);
  int64_t nx, ny;
  const float* x = a.f32(0, &nx);
  float* y = a.f32(1, &ny);
  const int64_t S = a.integer(2), T = a.integer(3), offset = a.integer(4);
  const double scale = a.number(5);
  const bool causal = a.flag(6);
  if (a.check(S > 0 && T > 0 && nx == ny && nx % (S * T) == 0))
    softmaxForward(x, y, nx / S, S, T, offset, static_cast<float>(scale), causal);
  return nullptr;
}

napi_value SoftmaxBiasForward(napi_env env, napi_callback_info info) {
  Args a(env, info, "softmaxBiasForward(x, bias, y: Float32Array, S, T, H, scale: number)", 7);
  int64_t nx, nb, ny;
  const float* x = a.f32(0, &nx);
  const float* bias = a.f32(1, &nb);
  float* y = a.f32(2, &ny);
  const int64_t S = a.integer(3), T = a.integer(4), H = a.integer(5);
  const double scale = a.number(6);
  if (a.check(S > 0 && T > 0 && H > 0 && nx == ny && nx % (H * T * S) == 0 && nb * H == nx))
    softmaxBiasForward(x, bias, y, nx / S, S, T, H, static_cast<float>(scale));
  return nullptr;
}

napi_value SoftmaxBackward(napi_env env, napi_callback_info info) {
  Args a(env, info, "softmaxBackward(y, dy, dx: Float32Array, S, scale: number)", 5);
  int64_t ny, nd, nx;
  const float* y = a.f32(0, &ny);
  const float* dy = a.f32(1, &nd);
  float* dx = a.f32(2, &nx);
  const int64_t S = a.integer(3);
  const double scale = a.number(4);
  if (a.check(S > 0 && ny == nd && ny == nx && ny % S == 0))
    softmaxBackward(y, dy, dx, ny / S, S, static_cast<float>(scale));
  return nullptr;
}

// y = x·w + b for x [N, in], w [in, out], b [out]: y starts as the bias rows and the GEMM adds
// the product onto it (no separate pass for the bias).
napi_value AffineForward(napi_env env, napi_callback_info info) {
  Args a(env, info, "affineForward(x, w, b, y: Float32Array)", 4);
  int64_t nx, nw, nb, ny;
  const float* x = a.f32(0, &nx);
  const float* w = a.f32(1, &nw);
  const float* b = a.f32(2, &nb);
  float* y = a.f32(3, &ny);
  if (!a.check(nb > 0 && nw % nb == 0 && nw > 0 && nx % (nw / nb) == 0 && ny == (nx / (nw / nb)) * nb))
    return nullptr;
  const int64_t out = nb, in = nw / nb, rows = nx / in;
  parallel_for(rows, grainRows(out), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) std::memcpy(y + r * out, b, out * sizeof(float));
  });
  if (!levanter::gemmParallel(x, in, 1, w, out, 1, y, rows, in, out, true))
    return fail(env, "affineForward: out of memory for the packing buffers");
  return nullptr;
}

napi_value AttentionForward(napi_env env, napi_callback_info info) {
  Args a(env, info, "attentionForward(qkv, out, P: Float32Array, B, T, H, K, scale: number)", 8);
  int64_t nq, no, np;
  const float* qkv = a.f32(0, &nq);
  float* out = a.f32(1, &no);
  float* P = a.f32(2, &np);
  const int64_t B = a.integer(3), T = a.integer(4), H = a.integer(5), K = a.integer(6);
  const double scale = a.number(7);
  if (!a.check(B > 0 && T > 0 && H > 0 && K > 0 && nq == B * T * 3 * H * K && no == B * T * H * K &&
               np == B * H * T * T))
    return nullptr;
  if (!attentionForward(qkv, out, P, B, T, H, K, static_cast<float>(scale)))
    return fail(env, "attentionForward: out of memory for the packing buffers");
  return nullptr;
}

napi_value AttentionBackward(napi_env env, napi_callback_info info) {
  Args a(env, info, "attentionBackward(qkv, P, dout, dqkv: Float32Array, B, T, H, K, scale: number)", 9);
  int64_t nq, np, no, nd;
  const float* qkv = a.f32(0, &nq);
  const float* P = a.f32(1, &np);
  const float* dout = a.f32(2, &no);
  float* dqkv = a.f32(3, &nd);
  const int64_t B = a.integer(4), T = a.integer(5), H = a.integer(6), K = a.integer(7);
  const double scale = a.number(8);
  if (!a.check(B > 0 && T > 0 && H > 0 && K > 0 && nq == B * T * 3 * H * K && nd == nq && no == B * T * H * K &&
               np == B * H * T * T))
    return nullptr;
  if (!attentionBackward(qkv, P, dout, dqkv, B, T, H, K, static_cast<float>(scale)))
    return fail(env, "attentionBackward: out of memory for the packing buffers");
  return nullptr;
}

napi_value DecodeAttention(napi_env env, napi_callback_info info) {
  Args a(env, info,
         "decodeAttention(q, k, v, pastK, pastV: Float32Array, lengths: Int32Array, outK, outV, out: Float32Array, "
         "H, Hkv, K, qStride, kvStride, scale: number)",
         15);
  int64_t nq, nk, nv, npk, npv, nl, nok, nov, no;
  const float* q = a.f32(0, &nq);
  const float* k = a.f32(1, &nk);
  const float* v = a.f32(2, &nv);
  const float* pastK = a.f32(3, &npk);
  const float* pastV = a.f32(4, &npv);
  const int32_t* lengths = a.i32(5, &nl);
  float* outK = a.f32(6, &nok);
  float* outV = a.f32(7, &nov);
  float* out = a.f32(8, &no);
  const int64_t H = a.integer(9), Hkv = a.integer(10), K = a.integer(11), qStride = a.integer(12),
                kvStride = a.integer(13);
  const double scale = a.number(14);
  const int64_t B = nl, unit = B * Hkv * K;
  bool sizes = B > 0 && H > 0 && Hkv > 0 && K > 0 && H % Hkv == 0 && unit > 0 && npk % unit == 0 && npv == npk;
  const int64_t S = sizes ? npk / unit : 0;
  sizes = sizes && nq >= (B - 1) * qStride + H * K && nk >= (B - 1) * kvStride + Hkv * K &&
          nv >= (B - 1) * kvStride + Hkv * K && nok == B * Hkv * (S + 1) * K && nov == nok && no == B * H * K;
  for (int64_t b = 0; sizes && b < B; b++) sizes = lengths[b] >= 0 && lengths[b] <= S;
  if (a.check(sizes))
    decodeAttention(q, qStride, k, v, kvStride, pastK, pastV, lengths, outK, outV, out, B, H, Hkv, K, S,
                    static_cast<float>(scale));
  return nullptr;
}

napi_value CrossEntropy(napi_env env, napi_callback_info info) {
  Args a(env, info, "crossEntropy(logits: Float32Array, targets: Int32Array, mask: Float32Array, denom, grad)", 5);
  int64_t nl, nt, nm, ng;
  const float* logits = a.f32(0, &nl);
  const int32_t* targets = a.i32(1, &nt);
  const float* mask = a.f32(2, &nm);
  const double denom = a.number(3);
  float* grad = a.f32(4, &ng);
  if (!a.check(nt > 0 && nm == nt && nl % nt == 0 && ng == nl && denom > 0)) return nullptr;
  const int64_t V = nl / nt;
  for (int64_t r = 0; r < nt; r++)
    if (targets[r] < 0 || targets[r] >= V) return fail(env, "crossEntropy: a target is outside the vocabulary");
  return number(env, crossEntropy(logits, targets, mask, nt, V, denom, grad));
}

napi_value AdamW(napi_env env, napi_callback_info info) {
  Args a(env, info, "adamw(g, m, v, p, out: Float32Array, scale, b1, c1, b2, c2, keep, step, rbc2, eps: number)", 14);
  int64_t ng, nm, nv, np, no;
  const float* g = a.f32(0, &ng);
  float* m = a.f32(1, &nm);
  float* v = a.f32(2, &nv);
  const float* p = a.f32(3, &np);
  float* out = a.f32(4, &no);
  double s[9];
  for (int i = 0; i < 9; i++) s[i] = a.number(5 + i);
  if (a.check(ng == nm && ng == nv && ng == np && ng == no))
    adamw(g, m, v, p, out, ng, s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8]);
  return nullptr;
}

napi_value SumSquares(napi_env env, napi_callback_info info) {
  Args a(env, info, "sumSquares(g: Float32Array)", 1);
  int64_t n;
  const float* g = a.f32(0, &n);
  if (!a.check(true)) return nullptr;
  return number(env, sumSquares(g, n));
}

}  // namespace

napi_value RegisterOps(napi_env env, napi_value exports) {
  const napi_property_descriptor props[] = {
      {"geluForward", nullptr, GeluForward, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"geluBackward", nullptr, GeluBackward, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"layerNormForward", nullptr, LayerNormForward, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"layerNormBackward", nullptr, LayerNormBackward, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"columnSum", nullptr, ColumnSum, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"softmaxForward", nullptr, SoftmaxForward, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"softmaxBiasForward", nullptr, SoftmaxBiasForward, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"softmaxBackward", nullptr, SoftmaxBackward, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"affineForward", nullptr, AffineForward, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"attentionForward", nullptr, AttentionForward, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"attentionBackward", nullptr, AttentionBackward, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"decodeAttention", nullptr, DecodeAttention, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"crossEntropy", nullptr, CrossEntropy, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"adamw", nullptr, AdamW, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"sumSquares", nullptr, SumSquares, nullptr, nullptr, nullptr, napi_default, nullptr},
  };
  napi_define_properties(env, exports, sizeof(props) / sizeof(props[0]), props);
  return exports;
}
