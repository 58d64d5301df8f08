// levanter's fused native kernels, attention family (native/ops.h): the affine layer on the native
// GEMM with the bias as its start, causal self-attention straight from the fused q/k/v projection
// (forward and backward), and one decode step's attention over a right-aligned KV cache.
#include "attention-decode.h"
#include "ops.h"

namespace levanter::ops {

namespace {

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

}  // namespace

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

}  // namespace levanter::ops
