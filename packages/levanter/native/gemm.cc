// levanter's native GEMM: C (+)= op(A)·op(B) for float32 row-major matrices on x86-64 with AVX2
// and FMA, batched by byte strides (a stride of 0 broadcasts), working in place on a
// WebAssembly.Memory's buffer (the tfjs wasm backend's heap). The classic blocked design: B is
// packed in KC×NC blocks of NR-column panels, A in MC×KC blocks of MR-row slivers (transposed
// operands are read through strides while packing), and a 6×16 micro-kernel keeps its tile of C in
// twelve ymm registers for a whole KC-deep pass. Every element of C is the same chain of FMAs in
// the same order whatever the shape around it (edge tiles run on zero-padded slivers), so a row
// computed alone equals that row inside a larger product, and splitting the work over threads
// (native/pool.h: by batch, by row slivers or by column panels) changes no bit of the result.
//
// Built by native/build.mjs (node-gyp) with -mavx2 -mfma, and JS asks cpuSupported() before
// calling anything else, so a CPU without AVX2/FMA never runs these kernels. The module also
// holds the fused elementwise kernels (native/ops.cc) and the thread count.
#include <cpuid.h>
#include <immintrin.h>
#include <node_api.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "gemm-impl.h"
#include "gemm.h"
#include "pool.h"

napi_value RegisterOps(napi_env env, napi_value exports);

namespace levanter {
// native/gemm-bf16.cc (compiled with -mavx512bf16): C (+)= bf16(op(A))·bf16(op(B)), float32 sums; false when out of
// memory for its packing buffers.
bool gemmBf16(const View& a, const View& b, float* c, int64_t ldc, int64_t M, int64_t K, int64_t N, bool accumulate);
bool bf16UsesAmx();  // native/gemm-bf16.cc: AMX tiles where the CPU has them (and LEVANTER_BF16_AMX is not 0)
// native/gemm-bf16-emu.cc (AVX2): the same products as gemmBf16's vdpbf16ps kernel, emulated
bool gemmBf16Emulated(const View& a, const View& b, float* c, int64_t ldc, int64_t M, int64_t K, int64_t N,
                      bool accumulate);
}  // namespace levanter

namespace {

using levanter::buffers;
using levanter::View;

constexpr int64_t MR = 6;
constexpr int64_t NR = 16;

// The AVX2 6×16 tile in twelve ymm registers, k unrolled by 4: A's sliver is fetched 32 k ahead and B's panel
// 2 KiB ahead (they stream from L2: the packed A block of GROUP passes outgrows a 512 KiB L2), and C's tile before
// the FMAs when it is added to. Prefetches only: each element is the same FMA chain in k order, the same bits
// (~4-9% more GFLOP/s on GPT-2 small's products here, a Zen 3 VM without AVX-512, median of 5 interleaved runs).
constexpr int64_t PREFETCH_A = 192, PREFETCH_B = 512;  // floats ahead

#define LEVANTER_AVX2_STEP(u)                                                    \
  {                                                                              \
    const __m256 b0 = _mm256_load_ps(b + NR * (u)), b1 = _mm256_load_ps(b + NR * (u) + 8); \
    const float* au = a + MR * (u);                                              \
    __m256 x = _mm256_broadcast_ss(au);                                          \
    c00 = _mm256_fmadd_ps(x, b0, c00);                                           \
    c01 = _mm256_fmadd_ps(x, b1, c01);                                           \
    x = _mm256_broadcast_ss(au + 1);                                             \
    c10 = _mm256_fmadd_ps(x, b0, c10);                                           \
    c11 = _mm256_fmadd_ps(x, b1, c11);                                           \
    x = _mm256_broadcast_ss(au + 2);                                             \
    c20 = _mm256_fmadd_ps(x, b0, c20);                                           \
    c21 = _mm256_fmadd_ps(x, b1, c21);                                           \
    x = _mm256_broadcast_ss(au + 3);                                             \
    c30 = _mm256_fmadd_ps(x, b0, c30);                                           \
    c31 = _mm256_fmadd_ps(x, b1, c31);                                           \
    x = _mm256_broadcast_ss(au + 4);                                             \
    c40 = _mm256_fmadd_ps(x, b0, c40);                                           \
    c41 = _mm256_fmadd_ps(x, b1, c41);                                           \
    x = _mm256_broadcast_ss(au + 5);                                             \
    c50 = _mm256_fmadd_ps(x, b0, c50);                                           \
    c51 = _mm256_fmadd_ps(x, b1, c51);                                           \
  }

void kernel(int64_t kb, const float* a, const float* b, float* c, int64_t ldc, bool add) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  const auto fetch = [](const float* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0); };
  if (add)
    for (int64_t i = 0; i < MR; i++) {
      fetch(c + i * ldc);
      fetch(c + i * ldc + NR - 1);
    }
  int64_t k = 0;
  for (; k + 4 <= kb; k += 4) {
    fetch(a + PREFETCH_A);
    fetch(b + PREFETCH_B);
    LEVANTER_AVX2_STEP(0)
    fetch(b + PREFETCH_B + NR);
    LEVANTER_AVX2_STEP(1)
    fetch(b + PREFETCH_B + 2 * NR);
    LEVANTER_AVX2_STEP(2)
    fetch(b + PREFETCH_B + 3 * NR);
    LEVANTER_AVX2_STEP(3)
    a += 4 * MR;
    b += 4 * NR;
  }
  for (; k < kb; k++) {
    LEVANTER_AVX2_STEP(0)
    a += MR;
    b += NR;
  }
  const __m256 acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  for (int64_t i = 0; i < MR; i++) {
    float* row = c + i * ldc;
    if (add) {
      _mm256_storeu_ps(row, _mm256_add_ps(_mm256_loadu_ps(row), acc[i][0]));
      _mm256_storeu_ps(row + 8, _mm256_add_ps(_mm256_loadu_ps(row + 8), acc[i][1]));
    } else {
      _mm256_storeu_ps(row, acc[i][0]);
      _mm256_storeu_ps(row + 8, acc[i][1]);
    }
  }
}
#undef LEVANTER_AVX2_STEP

// The AVX2 kernel's blocks by the L2 cache a core has. With 1 MiB or more (the AVX-512 machine's 2 MiB, where the
// blocking was tuned) or an L2 that cpuid does not report, the AVX-512 kernel's; with less (a 512 KiB L2, this Zen 3
// VM's), 48-row blocks of A and groups of 2 passes, so a group's packed A (96 KiB, not 576) stays in L2 and a tile's
// two B panels (32 KiB) in L1, with 2048-column blocks of B (A packed half as often). Against the wide blocking at
// GPT-2 small's products there, 1 thread: 3-5% more GFLOP/s summed over seven shapes (medians of 21 interleaved runs).
constexpr levanter::Blocking SMALL_L2{48, 2048, 2, true};
static_assert(SMALL_L2.mc % MR == 0 && SMALL_L2.nc % NR == 0, "blocks hold whole slivers and panels");
static_assert(SMALL_L2.group * SMALL_L2.mc <= levanter::PACK_A_ROWS &&
                  SMALL_L2.group * SMALL_L2.nc <= levanter::PACK_B_COLS,
              "the packing buffers hold a group");

// A core's L2 in KiB: cpuid 0x80000006's ECX[31:16] (Intel and AMD alike), 0 where it is not reported.
int64_t l2KiB() {
  unsigned a, b, c, d;
  if (!__get_cpuid(0x80000000, &a, &b, &c, &d) || a < 0x80000006) return 0;
  if (!__get_cpuid(0x80000006, &a, &b, &c, &d)) return 0;
  return c >> 16;
}

const levanter::Blocking& avx2Blocking() {
  static const levanter::Blocking chosen = [] {
    const int64_t l2 = l2KiB();
    return l2 > 0 && l2 < 1024 ? SMALL_L2 : levanter::WIDE_L2;
  }();
  return chosen;
}

bool useAvx512 = false;  // set by Init where the CPU has AVX-512F; setIsa() switches (tests)
bool useBf16 = false;    // setPrecision("bf16"): every product on native/gemm-bf16.cc or its emulation
bool emulateBf16 = true;  // set by setPrecision("bf16"): no AVX512_BF16 here, or LEVANTER_BF16_EMULATE=1

// One product C (+)= op(A)·op(B), C row-major M×N with rows ldc floats apart, on the widest kernel (or the bf16
// one); false when out of memory for the bf16 kernel's packing buffers.
bool gemm(const View& a, const View& b, float* c, int64_t ldc, int64_t M, int64_t K, int64_t N, bool accumulate) {
#ifdef LEVANTER_BF16
  if (useBf16 && !emulateBf16) return levanter::gemmBf16(a, b, c, ldc, M, K, N, accumulate);
#endif
  if (useBf16) return levanter::gemmBf16Emulated(a, b, c, ldc, M, K, N, accumulate);
  // a few rows (decoding): B streamed in place, no packing (native/gemv.cc; the same bits)
  if (levanter::smallMHandles(b, M, K, N) && levanter::gemmSmallM(a, b, c, ldc, M, K, N, accumulate, false))
    return true;
#ifdef LEVANTER_AVX512
  if (useAvx512) {
    levanter::gemmAvx512(a, b, c, ldc, M, K, N, accumulate);
    return true;
  }
#endif
  levanter::Blocked<MR, NR, kernel>::gemm(a, b, c, ldc, M, K, N, accumulate, avx2Blocking());
  return true;
}

bool bf16Here() {
#ifdef LEVANTER_BF16
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
#else
  return false;  // built without it (the compiler lacked -mavx512bf16)
#endif
}

bool avx512Here() {
#ifdef LEVANTER_AVX512
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
#else
  return false;  // built without it (the compiler lacked -mavx512f)
#endif
}

// One product split over the pool's threads: by row slivers where there are enough rows, unless the product is
// much wider than tall (a vocabulary head: each thread would pack all of B, 38.6 M floats at GPT-2 small, where
// by columns each packs its own part and A is small), else by column panels (decoding's single rows), else on
// this thread.
bool gemmThreaded(const View& a, const View& b, float* c, int64_t M, int64_t K, int64_t N, bool accumulate) {
  const int threads = levanter::Pool::get().threads();
  // a few rows: split by column groups in native/gemv.cc (a failure there is the packing buffers' error)
  if (!useBf16 && levanter::smallMHandles(b, M, K, N)) {
    if (K * N >= (int64_t{1} << 20)) levanter::adviseHugePages(b.x, (K - 1) * b.rs + (N - 1) * b.cs + 1);
    return levanter::gemmSmallM(a, b, c, N, M, K, N, accumulate, threads > 1);
  }
  if (threads == 1 || M * N * (K + 1) < (int64_t{1} << 20)) {
    return buffers() && gemm(a, b, c, N, M, K, N, accumulate);
  }
  std::atomic<bool> ok{true};
  // split at the active kernel's tiles (any split gives the same bits; whole tiles waste nothing)
  const int64_t mr = useAvx512 || useBf16 ? 12 : MR, nr = useAvx512 || useBf16 ? 32 : NR;
  const int64_t slivers = (M + mr - 1) / mr, panels = (N + nr - 1) / nr;
  const bool wide = N >= 8 * M && panels >= 2 * threads;
  if (slivers >= 2 * threads && !wide) {
    levanter::parallel_for(slivers, 2, [&](int64_t s0, int64_t s1) {
      const int64_t r0 = s0 * mr, r1 = s1 * mr < M ? s1 * mr : M;
      const View part{a.x + r0 * a.rs, a.rs, a.cs};
      if (!buffers() || !gemm(part, b, c + r0 * N, N, r1 - r0, K, N, accumulate)) ok = false;
    });
  } else {
    levanter::parallel_for(panels, 1, [&](int64_t p0, int64_t p1) {
      const int64_t c0 = p0 * nr, c1 = p1 * nr < N ? p1 * nr : N;
      const View part{b.x + c0 * b.cs, b.rs, b.cs};
      if (!buffers() || !gemm(a, part, c + c0, N, M, K, c1 - c0, accumulate)) ok = false;
    });
  }
  return ok;
}

}  // namespace

bool levanter::gemmOnThisThread(const float* a, int64_t ars, int64_t acs, const float* b, int64_t brs, int64_t bcs,
                                float* c, int64_t ldc, int64_t M, int64_t K, int64_t N) {
  return buffers() && gemm(View{a, ars, acs}, View{b, brs, bcs}, c, ldc, M, K, N, false);
}

bool levanter::gemmParallel(const float* a, int64_t ars, int64_t acs, const float* b, int64_t brs, int64_t bcs,
                            float* c, int64_t M, int64_t K, int64_t N, bool accumulate) {
  return gemmThreaded(View{a, ars, acs}, View{b, brs, bcs}, c, M, K, N, accumulate);
}

namespace {

// ---- N-API ----

napi_value fail(napi_env env, const char* msg) {
  napi_throw_range_error(env, "LEVANTER_NATIVE_GEMM", msg);
  return nullptr;
}

bool num(napi_env env, napi_value v, double* out) { return napi_get_value_double(env, v, out) == napi_ok; }

// A non-negative integer argument (byte offsets and strides reach past 2^32: read as doubles).
bool count(napi_env env, napi_value v, int64_t* out) {
  double d;
  if (!num(env, v, &d) || !(d >= 0) || d > 9007199254740991.0 || d != static_cast<double>(static_cast<int64_t>(d)))
    return false;
  *out = static_cast<int64_t>(d);
  return true;
}

napi_value CpuSupported(napi_env env, napi_callback_info) {
  __builtin_cpu_init();
  napi_value r;
  napi_get_boolean(env, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"), &r);
  return r;
}

// gemm(buffer, a, b, c, M, K, N, tA, tB, batch, sa, sb, sc, accumulate): pointers and strides in bytes.
napi_value Gemm(napi_env env, napi_callback_info info) {
  size_t argc = 14;
  napi_value argv[14];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  if (argc != 14) return fail(env, "gemm takes 14 arguments");
  void* data = nullptr;
  size_t length = 0;
  if (napi_get_arraybuffer_info(env, argv[0], &data, &length) != napi_ok)
    return fail(env, "gemm: the first argument must be an ArrayBuffer (the wasm memory's buffer)");
  int64_t v[13];
  const int idx[] = {1, 2, 3, 4, 5, 6, 9, 10, 11, 12};
  for (int i : idx)
    if (!count(env, argv[i], &v[i - 1]))
      return fail(env, "gemm: offsets, sizes and strides must be non-negative integers");
  bool tA = false, tB = false, acc = false;
  napi_get_value_bool(env, argv[7], &tA);
  napi_get_value_bool(env, argv[8], &tB);
  napi_get_value_bool(env, argv[13], &acc);
  const int64_t pa = v[0], pb = v[1], pc = v[2], M = v[3], K = v[4], N = v[5], batch = v[8];
  const int64_t sa = v[9], sb = v[10], sc = v[11];
  if (M == 0 || N == 0 || batch == 0) return nullptr;
  if ((pa | pb | pc | sa | sb | sc) & 3) return fail(env, "gemm: offsets and strides must be multiples of 4 bytes");
  const auto fits = [&](int64_t p, int64_t s, int64_t floats) {
    const int64_t end = p + (batch - 1) * s + floats * 4;
    return end <= static_cast<int64_t>(length);
  };
  if (!fits(pa, sa, M * K) || !fits(pb, sb, K * N) || !fits(pc, sc, M * N))
    return fail(env, "gemm: an operand reaches past the end of the buffer");
  if (!buffers()) return fail(env, "gemm: out of memory for the packing buffers");
  char* base = static_cast<char*>(data);
  const auto views = [&](int64_t i, View* a, View* b, float** C) {
    const float* A = reinterpret_cast<const float*>(base + pa + i * sa);
    const float* B = reinterpret_cast<const float*>(base + pb + i * sb);
    *C = reinterpret_cast<float*>(base + pc + i * sc);
    *a = tA ? View{A, 1, M} : View{A, K, 1};
    *b = tB ? View{B, 1, K} : View{B, N, 1};
  };
  const int threads = levanter::Pool::get().threads();
  if (batch >= threads && threads > 1 && batch * M * N * (K + 1) >= (int64_t{1} << 20)) {
    // whole products per thread (attention's batched heads)
    bool ok = true;
    levanter::parallel_for(batch, 1, [&](int64_t i0, int64_t i1) {
      if (!buffers()) {
        ok = false;
        return;
      }
      for (int64_t i = i0; i < i1; i++) {
        View a, b;
        float* C;
        views(i, &a, &b, &C);
        if (!gemm(a, b, C, N, M, K, N, acc)) ok = false;
      }
    });
    if (!ok) return fail(env, "gemm: out of memory for the packing buffers");
    return nullptr;
  }
  for (int64_t i = 0; i < batch; i++) {
    View a, b;
    float* C;
    views(i, &a, &b, &C);
    if (!gemmThreaded(a, b, C, M, K, N, acc)) return fail(env, "gemm: out of memory for the packing buffers");
  }
  return nullptr;
}

// setIsa(name?): the micro-kernel, "avx512" (where built and the CPU has it) or "avx2"; answers the
// one in use (no argument: just answers).
napi_value SetIsa(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  if (argc == 1) {
    char name[16] = {0};
    size_t len = 0;
    if (napi_get_value_string_utf8(env, argv[0], name, sizeof(name), &len) != napi_ok)
      return fail(env, "setIsa takes \"avx2\" or \"avx512\"");
    if (std::strcmp(name, "avx2") == 0) useAvx512 = false;
    else if (std::strcmp(name, "avx512") == 0 && avx512Here()) useAvx512 = true;
    else if (std::strcmp(name, "avx512") == 0)
      return fail(env, "setIsa: AVX-512 is unavailable (this CPU lacks AVX-512F, or the addon was built without it)");
    else return fail(env, "setIsa takes \"avx2\" or \"avx512\"");
  }
  napi_value r;
  napi_create_string_utf8(env, useAvx512 ? "avx512" : "avx2", NAPI_AUTO_LENGTH, &r);
  return r;
}

// setThreads(n): the pool's size (1 to 64, the calling thread included); answers the size.
napi_value SetThreads(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  int64_t n = 0;
  if (argc != 1 || !count(env, argv[0], &n) || n < 1 || n > 64)
    return fail(env, "setThreads takes one integer from 1 to 64");
  levanter::Pool::get().resize(static_cast<int>(n));
  napi_value r;
  napi_create_int32(env, levanter::Pool::get().threads(), &r);
  return r;
}

napi_value HasBf16(napi_env env, napi_callback_info) {
  napi_value r;
  napi_get_boolean(env, bf16Here(), &r);
  return r;
}

// Whether bf16 products run emulated (native/gemm-bf16-emu.cc): the CPU lacks AVX512_BF16 (or the addon was built
// without it), or LEVANTER_BF16_EMULATE=1 (read here, on the calling thread, when bf16 is switched on).
bool bf16EmulatedHere() {
  const char* env = std::getenv("LEVANTER_BF16_EMULATE");
  return !bf16Here() || (env && env[0] == '1');
}

// bf16Kernel(): the kernel setPrecision("bf16") runs the products on here: "amx", "vdpbf16ps" or "emulated".
napi_value Bf16Kernel(napi_env env, napi_callback_info) {
  const char* name = "emulated";
#ifdef LEVANTER_BF16
  if (!bf16EmulatedHere()) name = levanter::bf16UsesAmx() ? "amx" : "vdpbf16ps";
#endif
  napi_value r;
  napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &r);
  return r;
}

// setPrecision(name?): the products' operands, "fp32" (the default) or "bf16" (native/gemm-bf16.cc where hasBf16(),
// else its emulation, native/gemm-bf16-emu.cc); answers the one in use (no argument: just answers).
napi_value SetPrecision(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  if (argc == 1) {
    char name[16] = {0};
    size_t len = 0;
    if (napi_get_value_string_utf8(env, argv[0], name, sizeof(name), &len) != napi_ok)
      return fail(env, "setPrecision takes \"fp32\" or \"bf16\"");
    if (std::strcmp(name, "fp32") == 0) useBf16 = false;
    else if (std::strcmp(name, "bf16") == 0) useBf16 = true, emulateBf16 = bf16EmulatedHere();
    else return fail(env, "setPrecision takes \"fp32\" or \"bf16\"");
  }
  napi_value r;
  napi_create_string_utf8(env, useBf16 ? "bf16" : "fp32", NAPI_AUTO_LENGTH, &r);
  return r;
}

napi_value Init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"cpuSupported", nullptr, CpuSupported, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"gemm", nullptr, Gemm, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"setThreads", nullptr, SetThreads, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"setIsa", nullptr, SetIsa, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"hasBf16", nullptr, HasBf16, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"setPrecision", nullptr, SetPrecision, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"bf16Kernel", nullptr, Bf16Kernel, nullptr, nullptr, nullptr, napi_default, nullptr},
  };
  useAvx512 = avx512Here();
  napi_define_properties(env, exports, 7, props);
  return RegisterOps(env, exports);
}

}  // namespace

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
