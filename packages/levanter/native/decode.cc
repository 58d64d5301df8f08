// levanter's one-call GPT-2 decode step and the bf16-weight products' entry points (native/gemv-bf16.cc holds
// the kernel): see decodeGpt2 below.
#include <immintrin.h>
#include <node_api.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "attention-decode.h"
#include "gemm-impl.h"
#include "gemm.h"
#include "gemv-batch.h"
#include "gemv-bf16.h"
#include "norm-sums.h"
#include "ops.h"
#include "pool.h"

namespace levanter {

// ---- a whole GPT-2 decode step in one call (decodeGpt2) ----
//
// A decode step on tensor ops is some 260 kernels (LayerNorm, the affine layers, attention, GELU, the residual adds,
// reshapes), each with its dispatch, its output allocation and its pass over a few KiB; per token that was ~20 ms of
// a ~70 ms step at GPT-2 small. decodeGpt2 runs the same kernels in the same order on the same C++ code paths
// (the fused kernels' arithmetic; every product on gemmParallel, or at a server's batch on the batch kernel, which
// gives its bits: the bits of the step on tensor ops), reading the weights and the cache in place on the wasm heap
// and writing the grown cache and the logits there.

namespace {

// LayerNorm of rows of D: native/ops-norm.cc's forward arithmetic (native/norm-sums.h's float64 moments, then
// (x − mean)·rstd·g + b).
void layerNormRows(const float* x, const float* g, const float* b, float eps, float* y, int64_t rows, int64_t D) {
  for (int64_t r = 0; r < rows; r++) {
    const float* xr = x + r * D;
    float* yr = y + r * D;
    const float mean = static_cast<float>(ops::sumD(xr, D) / D);
    const float rs = static_cast<float>(1.0 / std::sqrt(ops::sumSqDevD(xr, mean, D) / D + eps));
    const __m256 mv = _mm256_set1_ps(mean), rv = _mm256_set1_ps(rs);
    int64_t j = 0;
    for (; j + 8 <= D; j += 8) {
      const __m256 h = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + j), mv), rv);
      _mm256_storeu_ps(yr + j, _mm256_add_ps(_mm256_mul_ps(h, _mm256_loadu_ps(g + j)), _mm256_loadu_ps(b + j)));
    }
    for (; j < D; j++) yr[j] = (xr[j] - mean) * rs * g[j] + b[j];
  }
}

// GELU (tanh) in place: native/ops-norm.cc's x·σ(2u) (the gate from native/norm-sums.h).
void geluInPlace(float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    _mm256_storeu_ps(x + i, _mm256_mul_ps(v, ops::geluGate8(v)));
  }
  for (; i < n; i++) {
    alignas(32) float t[8] = {x[i]};
    _mm256_store_ps(t, ops::geluGate8(_mm256_load_ps(t)));
    x[i] = x[i] * t[0];
  }
}

using Bf16Pack = std::vector<bf16w::Matrix*>;

bool bf16Cpu() {
#ifdef LEVANTER_BF16
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

// C (+)= A·op(B) for M rows of A (K floats each, contiguous): the native GEMM's bits either way. Up to SMALL_M rows,
// gemmParallel (its small-M path, B streamed once); more (a server's batch), the batch kernel (native/gemv-batch.h:
// B read in place by panels into L2, sums in registers): the blocked GEMM packs all of B again each call and pads 16
// rows to 24. GPT-2 small's step at 16 rows, one thread: 137 CPU ms on the blocked GEMM (the head on 4-row strips),
// 101–118 on the batch kernel (load 5–12).
bool product(const float* a, const View& b, float* c, int64_t M, int64_t K, int64_t N, bool accumulate) {
  if (M <= SMALL_M || !smallMHandles(b, SMALL_M, K, N))
    return gemmParallel(a, K, 1, b.x, b.rs, b.cs, c, M, K, N, accumulate);
  if (K * N >= (int64_t{1} << 20)) adviseHugePages(b.x, (K - 1) * b.rs + (N - 1) * b.cs + 1);
  return gemmRowsBatch(a, M, K, b, c, N, N, accumulate, Pool::get().threads() > 1);
}

// y = bias rows + x·W (the affine kernel: y starts as the bias, the product is added): W [K, N] in place, or its
// bf16 copy.
bool affine(const float* x, const float* w, const float* bias, float* y, int64_t M, int64_t K, int64_t N,
            const bf16w::Matrix* w16) {
  for (int64_t r = 0; r < M; r++) std::memcpy(y + r * N, bias, N * sizeof(float));
#ifdef LEVANTER_BF16
  if (w16) return bf16w::gemv(*w16, x, K, y, N, M, true, Pool::get().threads() > 1);
#endif
  return product(x, View{w, N, 1}, y, M, K, N, true);
}

inline void addTo(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; i++) x[i] = x[i] + y[i];
}

}  // namespace

// decodeGpt2(buffer, offsets, ints, dims, pack?): one decode step of a GPT-2 whose tensors lie on `buffer` at the
// byte `offsets` [wte, wpe, ln_f.g, ln_f.b, logits, then per layer ln_1.g, ln_1.b, c_attn.w, c_attn.b, c_proj.w,
// c_proj.b, ln_2.g, ln_2.b, c_fc.w, c_fc.b, mlp.c_proj.w, mlp.c_proj.b, pastK, pastV, outK, outV]; ints = the B
// tokens then the B cached lengths; dims = [B, S, D, H, L, F, V, eps] (each layer's past cache [B, H, S, K], the grown
// one [B, H, S + 1, K]) or [B, S, D, H, L, F, V, eps, capPast, capOut] (their columns a row and head: capPast ≥ S,
// capOut > S; outK, outV at pastK's and pastV's offsets where the cache grows in place, then capOut = capPast); pack:
// packBf16's weights, or undefined.
napi_value ops::DecodeGpt2(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  const char* usage = "decodeGpt2(buffer: ArrayBuffer, offsets: Float64Array, ints: Int32Array, dims: Float64Array, "
                      "pack?): sizes that do not fit the buffer or each other";
  void* base = nullptr;
  size_t bytes = 0, no = 0, ni = 0, nd = 0;
  double *off = nullptr, *dims = nullptr;
  int32_t* ints = nullptr;
  napi_typedarray_type t1, t2, t3;
  void *p1, *p2, *p3;
  napi_value ab;
  size_t o;
  if (argc < 4 || napi_get_arraybuffer_info(env, argv[0], &base, &bytes) != napi_ok ||
      napi_get_typedarray_info(env, argv[1], &t1, &no, &p1, &ab, &o) != napi_ok || t1 != napi_float64_array ||
      napi_get_typedarray_info(env, argv[2], &t2, &ni, &p2, &ab, &o) != napi_ok || t2 != napi_int32_array ||
      napi_get_typedarray_info(env, argv[3], &t3, &nd, &p3, &ab, &o) != napi_ok || t3 != napi_float64_array ||
      (nd != 8 && nd != 10))
    return ops::fail(env, usage);
  off = static_cast<double*>(p1);
  ints = static_cast<int32_t*>(p2);
  dims = static_cast<double*>(p3);
  const int64_t B = static_cast<int64_t>(dims[0]), S = static_cast<int64_t>(dims[1]), D = static_cast<int64_t>(dims[2]),
                H = static_cast<int64_t>(dims[3]), L = static_cast<int64_t>(dims[4]), F = static_cast<int64_t>(dims[5]),
                V = static_cast<int64_t>(dims[6]);
  const float eps = static_cast<float>(dims[7]);
  // dims[8], dims[9] where given: the columns a (row, head) of the past and the grown cache hold (else S and S + 1)
  const int64_t capPast = nd == 10 ? static_cast<int64_t>(dims[8]) : S,
                capOut = nd == 10 ? static_cast<int64_t>(dims[9]) : S + 1;
  const Bf16Pack* pack = nullptr;
  napi_valuetype pt = napi_undefined;
  if (argc == 5) napi_typeof(env, argv[4], &pt);
  if (pt == napi_external) {
    void* q = nullptr;
    napi_get_value_external(env, argv[4], &q);
    pack = static_cast<const Bf16Pack*>(q);
  }
  bool ok = B >= 1 && S >= 0 && D >= 1 && H >= 1 && D % H == 0 && L >= 1 && F >= 1 && V >= 1 &&
            no == static_cast<size_t>(5 + 16 * L) && ni == static_cast<size_t>(2 * B) &&
            (!pack || pack->size() == static_cast<size_t>(4 * L + 1));
  ok = ok && capPast >= S && capOut > S && (nd == 8 || (dims[8] == static_cast<double>(capPast) &&
                                                        dims[9] == static_cast<double>(capOut)));
  for (int64_t b = 0; ok && b < B; b++) ok = ints[b] >= 0 && ints[b] < V && ints[B + b] >= 0 && ints[B + b] <= S;
  const int64_t KV = B * H * capPast * (D / H), KV1 = B * H * capOut * (D / H);
  // floats of each tensor, in the offsets' order (wpe: rows up to the largest position asked for)
  int64_t maxPos = 0;
  for (int64_t b = 0; ok && b < B; b++) maxPos = ints[B + b] > maxPos ? ints[B + b] : maxPos;
  const int64_t head[5] = {V * D, (maxPos + 1) * D, D, D, B * V};
  const int64_t layer[16] = {D, D, D * 3 * D, 3 * D, D * D, D, D, D, D * F, F, F * D, D, KV, KV, KV1, KV1};
  float* at[5 + 16 * 64] = {};
  if (ok && L > 64) ok = false;
  for (size_t i = 0; ok && i < no; i++) {
    const double d = off[i];
    const int64_t n = i < 5 ? head[i] : layer[(i - 5) % 16];
    ok = d >= 0 && d == std::floor(d) && static_cast<int64_t>(d) % 4 == 0 &&
         static_cast<uint64_t>(d) + static_cast<uint64_t>(n) * 4 <= bytes;
    if (ok) at[i] = reinterpret_cast<float*>(static_cast<char*>(base) + static_cast<int64_t>(d));
  }
  // a cache grown in place is its own past (then at one stride), else the grown cache lies apart from it: a range
  // of KV floats and one of KV1 that meet nowhere
  for (int64_t l = 0; ok && l < L; l++) {
    const double* o = off + 5 + 16 * l;
    for (int i = 0; ok && i < 2; i++)
      ok = o[14 + i] == o[12 + i] ? capOut == capPast
                                  : o[14 + i] + 4.0 * KV1 <= o[12 + i] || o[12 + i] + 4.0 * KV <= o[14 + i];
  }
  if (!ok) return ops::fail(env, usage);
  std::vector<float> x(B * D), a(B * D), qkv(B * 3 * D), att(B * D), y(B * D), h(B * F);
  const float* wte = at[0];
  const float* wpe = at[1];
  for (int64_t b = 0; b < B; b++)
    for (int64_t j = 0; j < D; j++) x[b * D + j] = wte[ints[b] * D + j] + wpe[ints[B + b] * D + j];
  const int32_t* lengths = ints + B;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D / H)));
  const auto w16 = [&](int64_t i) -> const bf16w::Matrix* { return pack ? (*pack)[i] : nullptr; };
  for (int64_t l = 0; l < L && ok; l++) {
    float* const* p = at + 5 + 16 * l;
    layerNormRows(x.data(), p[0], p[1], eps, a.data(), B, D);
    ok = affine(a.data(), p[2], p[3], qkv.data(), B, D, 3 * D, w16(4 * l));
    // native/attention-decode.h: q, k and v read in place from the fused projection's rows of 3·D
    const float* q = qkv.data();
    ops::decodeAttentionInto(q, 3 * D, q + D, q + 2 * D, 3 * D, p[12], p[13], capPast, lengths, p[14], p[15], capOut,
                             att.data(), B, H, H, D / H, S, scale);
    ok = ok && affine(att.data(), p[4], p[5], y.data(), B, D, D, w16(4 * l + 1));
    addTo(x.data(), y.data(), B * D);
    layerNormRows(x.data(), p[6], p[7], eps, a.data(), B, D);
    ok = ok && affine(a.data(), p[8], p[9], h.data(), B, D, F, w16(4 * l + 2));
    geluInPlace(h.data(), B * F);
    ok = ok && affine(h.data(), p[10], p[11], y.data(), B, F, D, w16(4 * l + 3));
    addTo(x.data(), y.data(), B * D);
  }
  layerNormRows(x.data(), at[2], at[3], eps, a.data(), B, D);
#ifdef LEVANTER_BF16
  if (ok && pack) ok = bf16w::gemv(*(*pack)[4 * L], a.data(), D, at[4], V, B, false, Pool::get().threads() > 1);
  else
#endif
    ok = ok && product(a.data(), View{wte, 1, D}, at[4], B, D, V, false);
  if (!ok) return ops::fail(env, "decodeGpt2: out of memory for a product's buffers");
  return nullptr;
}

// packBf16(buffer, offsets, shapes): the matrices at byte `offsets` (shapes: K, N, row stride, column stride in
// floats, per matrix: op(B)(k, j) = b[k·rs + j·cs]) converted once to bf16 for decodeGpt2; an external value that
// frees them when collected. Throws where the CPU or the build lacks AVX512_BF16.
napi_value ops::PackBf16(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  if (!bf16Cpu()) return ops::fail(env, "packBf16: this CPU lacks AVX512_BF16, or the addon was built without it");
  void* base = nullptr;
  size_t bytes = 0, no = 0, ns = 0, o;
  napi_typedarray_type t1, t2;
  void *p1, *p2;
  napi_value ab;
  if (argc != 3 || napi_get_arraybuffer_info(env, argv[0], &base, &bytes) != napi_ok ||
      napi_get_typedarray_info(env, argv[1], &t1, &no, &p1, &ab, &o) != napi_ok || t1 != napi_float64_array ||
      napi_get_typedarray_info(env, argv[2], &t2, &ns, &p2, &ab, &o) != napi_ok || t2 != napi_float64_array ||
      ns != 4 * no || no == 0)
    return ops::fail(env, "packBf16(buffer: ArrayBuffer, offsets: Float64Array, shapes: Float64Array of 4 per matrix)");
  const double* off = static_cast<double*>(p1);
  const double* sh = static_cast<double*>(p2);
  auto* pack = new Bf16Pack();
  bool ok = true;
#ifdef LEVANTER_BF16
  for (size_t i = 0; ok && i < no; i++) {
    const int64_t K = static_cast<int64_t>(sh[4 * i]), N = static_cast<int64_t>(sh[4 * i + 1]),
                  rs = static_cast<int64_t>(sh[4 * i + 2]), cs = static_cast<int64_t>(sh[4 * i + 3]);
    const double d = off[i];
    ok = K >= 1 && N >= 1 && rs >= 0 && cs >= 0 && d >= 0 && static_cast<int64_t>(d) % 4 == 0 &&
         static_cast<uint64_t>(d) + 4 * static_cast<uint64_t>((K - 1) * rs + (N - 1) * cs + 1) <= bytes;
    const float* b = ok ? reinterpret_cast<const float*>(static_cast<char*>(base) + static_cast<int64_t>(d)) : nullptr;
    bf16w::Matrix* m = ok ? bf16w::pack(b, rs, cs, K, N) : nullptr;
    ok = m != nullptr;
    if (m) pack->push_back(m);
  }
#endif
  if (!ok) {
    for (auto* m : *pack) bf16w::release(m);
    delete pack;
    return ops::fail(env, "packBf16: a matrix does not fit the buffer, or memory ran out");
  }
  napi_value out;
  napi_create_external(
      env, pack,
      [](napi_env, void* data, void*) {
        auto* p = static_cast<Bf16Pack*>(data);
#ifdef LEVANTER_BF16
        for (auto* m : *p) bf16w::release(m);
#endif
        delete p;
      },
      nullptr, &out);
  return out;
}

// gemvBf16(pack, i, a, c, M, accumulate): C (+)= bf16(A)·W_i for packBf16's matrix i and M rows of A (tests).
napi_value ops::GemvBf16(napi_env env, napi_callback_info info) {
  Args args(env, info, "gemvBf16(pack, i: number, a, c: Float32Array, M: number, accumulate: boolean)", 6);
  void* q = nullptr;
  if (args.argc != 6 || napi_get_value_external(env, args.argv[0], &q) != napi_ok || !q)
    return ops::fail(env, "gemvBf16: the first argument is not a packBf16 value");
  const auto* pack = static_cast<const Bf16Pack*>(q);
  const int64_t i = args.integer(1), M = args.integer(4);
  int64_t na = 0, nc = 0;
  const float* a = args.f32(2, &na);
  float* c = args.f32(3, &nc);
  const bool accumulate = args.flag(5);
  const bool fits = i < static_cast<int64_t>(pack->size()) && M >= 1;
  if (!args.check(fits && na == M * (*pack)[i]->K && nc == M * (*pack)[i]->N)) return nullptr;
#ifdef LEVANTER_BF16
  const bf16w::Matrix& w = *(*pack)[i];
  if (!bf16w::gemv(w, a, w.K, c, w.N, M, accumulate, Pool::get().threads() > 1))
    return ops::fail(env, "gemvBf16: out of memory");
#endif
  return nullptr;
}

// gemmRowsBatch(a, b, c, M, K, N, accumulate, avx2?, tB?): C (+)= A·op(B) for M rows of A [M, K] on the batch
// kernel (native/gemv-batch.h; avx2: its AVX2 form where the CPU has AVX-512 too; tB: b is [N, K], op(B) its
// transpose), on the pool's threads (tests).
napi_value ops::GemmRowsBatch(napi_env env, napi_callback_info info) {
  Args args(env, info, "gemmRowsBatch(a, b, c: Float32Array, M, K, N: number, accumulate, avx2?, tB?: boolean)", 9);
  if (args.argc == 7 || args.argc == 8) args.ok = true;  // avx2, tB left out
  int64_t na = 0, nb = 0, nc = 0;
  const float* a = args.f32(0, &na);
  const float* b = args.f32(1, &nb);
  float* c = args.f32(2, &nc);
  const int64_t M = args.integer(3), K = args.integer(4), N = args.integer(5);
  const bool accumulate = args.flag(6), avx2 = args.argc >= 8 && args.flag(7), tB = args.argc == 9 && args.flag(8);
  if (!args.check(M >= 1 && K >= 1 && N >= 1 && na == M * K && nb == K * N && nc == M * N)) return nullptr;
  const View bv = tB ? View{b, 1, K} : View{b, N, 1};
  if (!gemmRowsBatch(a, M, K, bv, c, N, N, accumulate, Pool::get().threads() > 1, !avx2))
    return ops::fail(env, "gemmRowsBatch: out of memory for its panel buffer");
  return nullptr;
}

}  // namespace levanter
