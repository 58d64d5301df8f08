// levanter's fused native kernels, GELU and LayerNorm family (native/ops.h): GELU (tanh) forward and
// backward, LayerNorm over rows forward and backward, and the sum over rows (a bias's or a gain's
// gradient), each split by rows over native/pool.h's threads with sums in fixed blocks of rows.
#include "norm-sums.h"
#include "ops.h"

namespace levanter::ops {

namespace {

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

}  // namespace

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

}  // namespace levanter::ops
