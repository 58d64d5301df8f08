// levanter's fused native kernels, softmax family (native/ops.h): attention's scaled softmax over
// rows, causal or with an additive bias, and its backward. softmaxRow and softmaxGradRow are the
// row kernels the attention kernels (ops-attention.cc) call too, so the bits are the same.
#include "ops.h"

namespace levanter::ops {

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

namespace {

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

}  // namespace

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

}  // namespace levanter::ops
