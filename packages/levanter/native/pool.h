// The native kernels' threads: a fixed pool (1 to 64 threads, the caller included) that runs
// `parallel_for(n, f)` as contiguous chunks of [0, n), one per thread, the caller taking the first, or
// `parallel_chunks(n, chunk, f)` as fixed chunks claimed by whichever thread is free (a decode step's
// products, where a descheduled worker must not stall the caller). Work is split by index, and every kernel
// computes each output element on one thread in one fixed order, so results do not depend on the thread
// count or on which thread ran a chunk. Idle workers, and a caller
// waiting for the other chunks, spin briefly (bounded, with pause) and then sleep on a condition variable,
// never spin or yield for long: on a shared machine a spinning waiter takes the core its worker needs.
// A call from inside a chunk runs inline.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace levanter {

class Pool {
 public:
  static Pool& get() {
    static Pool pool;
    return pool;
  }

  int threads() const { return threads_; }

  // Change the thread count (joins the old workers). Not while a parallel_for runs.
  void resize(int n) {
    if (n < 1) n = 1;
    if (n > 64) n = 64;
    if (n == threads_) return;
    stop();
    threads_ = n;
    // new workers start at the current job count: they wait for the next job, not a finished one
    const uint64_t g = generation_.load();
    for (int i = 1; i < n; i++) workers_.emplace_back([this, i, g] { loop(i, g); });
  }

  // f(begin, end) over contiguous chunks of [0, n); `grain` is the smallest chunk worth a thread.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f) {
    int64_t parts = grain > 0 ? n / grain : n;
    if (parts > threads_) parts = threads_;
    if (parts <= 1 || inside_) {
      if (n > 0) f(0, n);
      return;
    }
    bool sleepers;
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = &f;
      n_ = n;
      parts_ = parts;
      pending_.store(static_cast<int>(parts - 1), std::memory_order_relaxed);
      generation_.store(generation_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
      sleepers = sleeping_ > 0;
    }
    if (sleepers) cv_.notify_all();
    run(f, n, parts, 0);
    // The caller's chunk is done: wait for the others, spinning briefly, then asleep (a waiter that spins or
    // yields for long takes the core from the very worker it waits for when the machine is shared).
    for (int spins = 0; spins < SPINS; spins++) {
      if (pending_.load(std::memory_order_acquire) == 0) return;
      pause();
    }
    std::unique_lock<std::mutex> lock(doneMu_);
    doneCv_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
  }

  // f(begin, end) over the chunks [i·chunk, min((i + 1)·chunk, n)) of [0, n), each claimed in turn by whichever
  // thread is free: the caller and any worker that wakes in time. The caller returns once every chunk is done,
  // never waiting for a worker that has not started: on a shared machine a worker without a core costs the call
  // nothing but its help (a static split waits for it, so a descheduled worker stalls the whole product). Each
  // chunk runs on one thread in one piece, so a kernel whose chunk's outputs do not depend on which thread runs it
  // gives the same bits at any thread count and any timing.
  void parallel_chunks(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t)>& f) {
    if (chunk < 1) chunk = 1;
    const int64_t chunks = (n + chunk - 1) / chunk;
    if (chunks <= 1 || threads_ == 1 || inside_) {
      for (int64_t i = 0; i < chunks; i++) f(i * chunk, (i + 1) * chunk < n ? (i + 1) * chunk : n);
      return;
    }
    bool sleepers;
    uint64_t g;
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = &f;
      n_ = n;
      parts_ = 0;  // a chunked job: no worker is owed a part
      chunk_ = chunk;
      next_.store(0, std::memory_order_relaxed);
      g = generation_.load(std::memory_order_relaxed) + 1;
      generation_.store(g, std::memory_order_release);
      sleepers = sleeping_ > 0;
    }
    if (sleepers) cv_.notify_all();
    claim(f, n, chunk);
    // Closed: a worker that arrives from now on sees it and leaves the job alone; then wait for those inside it,
    // each finishing the chunk it claimed.
    closed_.store(g, std::memory_order_seq_cst);
    for (int spins = 0; spins < SPINS; spins++) {
      if (active_.load(std::memory_order_seq_cst) == 0) return;
      pause();
    }
    std::unique_lock<std::mutex> lock(doneMu_);
    doneCv_.wait(lock, [&] { return active_.load(std::memory_order_seq_cst) == 0; });
  }

  ~Pool() { stop(); }

 private:
  Pool() {}

  // About 10 µs of spinning (a pause is ~40 ns here) before sleeping: long enough to catch the next of a run of
  // small products (decoding), short enough to cost little where the core is wanted elsewhere.
  static constexpr int SPINS = 256;

  static void pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }

  static void run(const std::function<void(int64_t, int64_t)>& job, int64_t n, int64_t parts, int64_t part) {
    const int64_t begin = n * part / parts, end = n * (part + 1) / parts;
    inside_ = true;
    job(begin, end);
    inside_ = false;
  }

  void claim(const std::function<void(int64_t, int64_t)>& job, int64_t n, int64_t chunk) {
    inside_ = true;
    for (int64_t b = next_.fetch_add(chunk, std::memory_order_relaxed); b < n;
         b = next_.fetch_add(chunk, std::memory_order_relaxed))
      job(b, b + chunk < n ? b + chunk : n);
    inside_ = false;
  }

  void loop(int part, uint64_t seen) {
    for (;;) {
      // spin briefly for the next job, then sleep on the condition variable
      for (int spins = 0; spins < SPINS && generation_.load(std::memory_order_acquire) == seen; spins++) pause();
      const std::function<void(int64_t, int64_t)>* job;
      int64_t n, parts, chunk;
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (!quit_ && generation_.load(std::memory_order_relaxed) == seen) {
          sleeping_++;
          cv_.wait(lock, [&] { return quit_ || generation_.load(std::memory_order_relaxed) != seen; });
          sleeping_--;
        }
        if (quit_) return;
        seen = generation_.load(std::memory_order_relaxed);
        job = job_;
        n = n_;
        parts = parts_;
        chunk = chunk_;
      }
      if (parts == 0) {
        // a chunked job: join it only while it is open (its caller has not closed it: the job and its function
        // still exist), counted as active first so that the caller, once it closes it, waits for this thread
        active_.fetch_add(1, std::memory_order_seq_cst);
        if (closed_.load(std::memory_order_seq_cst) < seen) claim(*job, n, chunk);
        if (active_.fetch_sub(1, std::memory_order_seq_cst) == 1) {
          { std::lock_guard<std::mutex> lock(doneMu_); }
          doneCv_.notify_one();
        }
        continue;
      }
      // A worker past the job's parts sits it out; a worker in it cannot miss it (the caller waits
      // for every part before the next job).
      if (part < parts) {
        run(*job, n, parts, part);
        if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
          // the last part: wake the caller if it sleeps (taking the lock orders this with its check)
          { std::lock_guard<std::mutex> lock(doneMu_); }
          doneCv_.notify_one();
        }
      }
    }
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
    quit_ = false;
  }

  int threads_ = 1;
  std::vector<std::thread> workers_;
  std::mutex mu_;  // guards the job's fields, quit_ and sleeping_; generation_ changes under it
  std::condition_variable cv_;
  std::atomic<uint64_t> generation_{0};
  int sleeping_ = 0;
  bool quit_ = false;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t n_ = 0, parts_ = 0, chunk_ = 0;
  std::atomic<int> pending_{0};
  // a chunked job's state: the next index to claim, the threads inside it, the last generation its caller closed
  std::atomic<int64_t> next_{0};
  std::atomic<int> active_{0};
  std::atomic<uint64_t> closed_{0};
  std::mutex doneMu_;  // the caller's sleep until the last part is done
  std::condition_variable doneCv_;
  static thread_local bool inside_;
};

inline thread_local bool Pool::inside_ = false;

inline void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f) {
  Pool::get().parallel_for(n, grain, f);
}

inline void parallel_chunks(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t)>& f) {
  Pool::get().parallel_chunks(n, chunk, f);
}

}  // namespace levanter
