// This machine's memory bandwidth on one thread or several, STREAM-style: three float arrays far larger
// than the caches, timed over copy (a = b), triad (a = b + s·c) and a read-only sum of a, best of a few
// passes each, on huge pages where the kernel gives them; each over the wall clock and over CPU time
// (copyCpu, triadCpu, readCpu: on a shared machine, what a core of our own gives, to set beside a bench's
// tokens per CPU second; with several threads, the bytes over all their CPU seconds, so a per-core rate).
// With `threads` > 1 (the pool's threads, however many it has) each pass is split in 1 MiB chunks that the
// pool's threads claim in turn (Pool::parallel_chunks), as a decode step's products are: what that many
// threads get on this machine as it is, a worker without a core included. Bytes are counted as STREAM counts them (the
// arrays each pass names: 2, 3 and 1, no write-allocate traffic), in GB/s of 10^9 bytes. The bench
// divides it by the bytes a decoded token reads (its weights) for generation's roofline; the
// read-only sum is the pattern of a matrix–vector product.
#include <sys/mman.h>

#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "ops.h"
#include "pool.h"

namespace levanter::ops {

namespace {

double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// This thread's CPU time: on a shared machine the wall clock counts other processes' time slices too.
double cpuSeconds(bool process) {
  timespec t;
  clock_gettime(process ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

float readSum(const float* a, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_add_ps(s0, _mm256_load_ps(a + i));
    s1 = _mm256_add_ps(s1, _mm256_load_ps(a + i + 8));
    s2 = _mm256_add_ps(s2, _mm256_load_ps(a + i + 16));
    s3 = _mm256_add_ps(s3, _mm256_load_ps(a + i + 24));
  }
  float s = hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  for (; i < n; i++) s += a[i];
  return s;
}

}  // namespace

// memoryBandwidth(megabytes, repeats, threads?) → { copy, triad, read, …Cpu, threads } GB/s on the calling thread,
// or with threads > 1 on all the pool's threads (answered as `threads`).
napi_value MemoryBandwidth(napi_env env, napi_callback_info info) {
  Args args(env, info, "memoryBandwidth(megabytes, repeats: number, threads?: number)", 3);
  if (args.argc == 2) args.ok = true;  // threads left out
  const int64_t mb = args.integer(0), repeats = args.integer(1), want = args.argc == 3 ? args.integer(2) : 1;
  if (!args.ok || mb < 1 || mb > 4096 || repeats < 1 || repeats > 100 || want < 1 || want > 64)
    return fail(env, "memoryBandwidth(megabytes, repeats, threads?): megabytes a whole number from 1 to 4096, "
                     "repeats 1 to 100, threads 1 to 64");
  const int64_t threads = want > 1 ? Pool::get().threads() : 1;
  const int64_t n = (mb * 1000000 / 4) & ~int64_t{31};
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  // on 2 MiB pages where the kernel gives them, as the weights decoding streams are (native/gemv.cc)
  constexpr size_t HUGE = size_t{1} << 21;
  const size_t rounded = (bytes + HUGE - 1) & ~(HUGE - 1);
  float* a = static_cast<float*>(std::aligned_alloc(HUGE, rounded));
  float* b = static_cast<float*>(std::aligned_alloc(HUGE, rounded));
  float* c = static_cast<float*>(std::aligned_alloc(HUGE, rounded));
#ifdef MADV_HUGEPAGE
  for (float* x : {a, b, c})
    if (x) madvise(x, rounded, MADV_HUGEPAGE);
#endif
  if (!a || !b || !c) {
    std::free(a);
    std::free(b);
    std::free(c);
    return fail(env, "memoryBandwidth: out of memory for its three arrays; ask for fewer megabytes");
  }
  // each pass over chunks of whole 32-float blocks, one per thread (the chunks a pass's own threads touch first)
  const int64_t blocks = n / 32;
  const auto split = [&](const auto& chunk) {
    if (threads == 1) chunk(int64_t{0}, n);
    else parallel_chunks(blocks, 8192, [&](int64_t b0, int64_t b1) { chunk(b0 * 32, b1 * 32); });
  };
  split([&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; i++) a[i] = 1.0f, b[i] = 2.0f, c[i] = 0.5f;
  });
  // best of the passes, GB/s over the wall clock ([0]) and over CPU time ([1]: this thread's, or with several
  // threads the process's, which they all add to)
  double copy[2] = {0, 0}, triad[2] = {0, 0}, read[2] = {0, 0};
  std::atomic<float> sink{0};
  const __m256 s = _mm256_set1_ps(3.0f);
  const auto timed = [&](double* best, double count, const auto& chunk) {
    const double t = seconds(), u = cpuSeconds(threads > 1);
    split(chunk);
    const double dt = seconds() - t, du = cpuSeconds(threads > 1) - u;
    if (count * bytes / dt > best[0]) best[0] = count * bytes / dt;
    if (du > 0 && count * bytes / du > best[1]) best[1] = count * bytes / du;
  };
  for (int64_t r = 0; r < repeats; r++) {
    timed(copy, 2.0, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; i += 8) _mm256_store_ps(a + i, _mm256_load_ps(b + i));
    });
    timed(triad, 3.0, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; i += 8)
        _mm256_store_ps(a + i, _mm256_add_ps(_mm256_load_ps(b + i), _mm256_mul_ps(s, _mm256_load_ps(c + i))));
    });
    timed(read, 1.0, [&](int64_t i0, int64_t i1) { sink.store(sink.load() + readSum(a + i0, i1 - i0)); });
  }
  std::free(a);
  std::free(b);
  std::free(c);
  napi_value out;
  napi_create_object(env, &out);
  napi_set_named_property(env, out, "copy", number(env, copy[0] / 1e9));
  napi_set_named_property(env, out, "triad", number(env, triad[0] / 1e9));
  napi_set_named_property(env, out, "read", number(env, read[0] / 1e9));
  napi_set_named_property(env, out, "copyCpu", number(env, copy[1] / 1e9));
  napi_set_named_property(env, out, "triadCpu", number(env, triad[1] / 1e9));
  napi_set_named_property(env, out, "readCpu", number(env, read[1] / 1e9));
  napi_set_named_property(env, out, "threads", number(env, static_cast<double>(threads)));
  return out;
}

}  // namespace levanter::ops
