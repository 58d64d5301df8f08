// What native/ops-*.cc share: the vector helpers (exp, horizontal sums), the threading grain, the
// N-API argument reader, and each family's entry points, which native/ops.cc's RegisterOps puts on
// the addon's exports. The kernels are split by family, one file each: ops-norm.cc (GELU, LayerNorm,
// column sums), ops-softmax.cc (attention's softmax rows), ops-attention.cc (the affine layer,
// causal self-attention and the decode step's attention), ops-loss.cc (cross-entropy, AdamW, the
// gradient's squared norm). Every file is compiled with the flags of binding.gyp's levanter_gemm
// target (-mavx2 -mfma -ffp-contract=off: see ops.cc for why the last one).
#pragma once

#include <immintrin.h>
#include <node_api.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gemm.h"
#include "pool.h"

namespace levanter::ops {

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

// softmax over the first n of a row of S (ops-softmax.cc; attention's kernels use it too).
void softmaxRow(const float* xr, const float* bias, float* yr, int64_t n, int64_t S, float scale);
// its gradient over a row (ops-softmax.cc).
void softmaxGradRow(const float* yr, const float* dr, float* o, int64_t n, int64_t S, float scale);

// ---- N-API ----

inline napi_value fail(napi_env env, const char* msg) {
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

inline napi_value number(napi_env env, double x) {
  napi_value r;
  napi_create_double(env, x, &r);
  return r;
}

// ---- each family's entry points (native/ops.cc registers them) ----

// ops-norm.cc
napi_value GeluForward(napi_env env, napi_callback_info info);
napi_value GeluBackward(napi_env env, napi_callback_info info);
napi_value LayerNormForward(napi_env env, napi_callback_info info);
napi_value LayerNormBackward(napi_env env, napi_callback_info info);
napi_value ColumnSum(napi_env env, napi_callback_info info);
// ops-softmax.cc
napi_value SoftmaxForward(napi_env env, napi_callback_info info);
napi_value SoftmaxBiasForward(napi_env env, napi_callback_info info);
napi_value SoftmaxBackward(napi_env env, napi_callback_info info);
// ops-attention.cc
napi_value AffineForward(napi_env env, napi_callback_info info);
napi_value AttentionForward(napi_env env, napi_callback_info info);
napi_value AttentionBackward(napi_env env, napi_callback_info info);
napi_value DecodeAttention(napi_env env, napi_callback_info info);
// ops-loss.cc
napi_value CrossEntropy(napi_env env, napi_callback_info info);
napi_value AdamW(napi_env env, napi_callback_info info);
napi_value SumSquares(napi_env env, napi_callback_info info);
// gemv.cc
napi_value SetSmallM(napi_env env, napi_callback_info info);
napi_value DecodeGpt2(napi_env env, napi_callback_info info);
napi_value PackBf16(napi_env env, napi_callback_info info);
napi_value GemvBf16(napi_env env, napi_callback_info info);
// stream.cc
napi_value MemoryBandwidth(napi_env env, napi_callback_info info);

}  // namespace levanter::ops
