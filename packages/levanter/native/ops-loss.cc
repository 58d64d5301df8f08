// levanter's fused native kernels, loss and optimizer family (native/ops.h): cross-entropy with its
// gradient in the same pass, AdamW (float64 arithmetic, four at a time, float32 storage, in the JS version's order:
// kernels/adamw-update.ts) and the gradient's squared norm.
#include "ops.h"

namespace levanter::ops {

namespace {

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
    // Four at a time in AVX2 float64: the same operations in the same order, each correctly rounded (no
    // contraction: -ffp-contract=off), so the same bits as the scalar loop (which std::sqrt's errno kept scalar:
    // its divide and square root were most of the update's time)
    const __m256d vs = _mm256_set1_pd(scale), vb1 = _mm256_set1_pd(b1), vc1 = _mm256_set1_pd(c1);
    const __m256d vb2 = _mm256_set1_pd(b2), vc2 = _mm256_set1_pd(c2), vkeep = _mm256_set1_pd(keep);
    const __m256d vstep = _mm256_set1_pd(step), vrbc2 = _mm256_set1_pd(rbc2), veps = _mm256_set1_pd(eps);
    int64_t i = i0;
    for (; i + 4 <= i1; i += 4) {
      const __m256d gi = _mm256_mul_pd(_mm256_cvtps_pd(_mm_loadu_ps(g + i)), vs);
      const __m256d mi =
          _mm256_add_pd(_mm256_mul_pd(vb1, _mm256_cvtps_pd(_mm_loadu_ps(m + i))), _mm256_mul_pd(vc1, gi));
      const __m256d vi = _mm256_add_pd(_mm256_mul_pd(vb2, _mm256_cvtps_pd(_mm_loadu_ps(v + i))),
                                       _mm256_mul_pd(_mm256_mul_pd(vc2, gi), gi));
      const __m256d pi = _mm256_cvtps_pd(_mm_loadu_ps(p + i));
      const __m256d den = _mm256_add_pd(_mm256_sqrt_pd(_mm256_mul_pd(vi, vrbc2)), veps);
      const __m256d upd = _mm256_sub_pd(_mm256_mul_pd(pi, vkeep), _mm256_div_pd(_mm256_mul_pd(vstep, mi), den));
      _mm_storeu_ps(m + i, _mm256_cvtpd_ps(mi));
      _mm_storeu_ps(v + i, _mm256_cvtpd_ps(vi));
      _mm_storeu_ps(out + i, _mm256_cvtpd_ps(upd));
    }
    for (; i < i1; i++) {
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

}  // namespace

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

}  // namespace levanter::ops
