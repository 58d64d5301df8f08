// The native kernels' threads: a fixed pool (1 to 64 threads, the caller included) that runs
// `parallel_for(n, f)` as contiguous chunks of [0, n), one per thread, the caller taking the first.
// Work is always split by index, never stolen, and every kernel computes each output element on one
// thread in one fixed order, so results do not depend on the thread count. Idle workers sleep on a
// condition variable after a short spin; a call from inside a chunk runs inline.
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
    for (int i = 1; i < n; i++) workers_.emplace_back([this, i, g = generation_] { loop(i, g); });
  }

  // f(begin, end) over contiguous chunks of [0, n); `grain` is the smallest chunk worth a thread.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f) {
    int64_t parts = grain > 0 ? n / grain : n;
    if (parts > threads_) parts = threads_;
    if (parts <= 1 || inside_) {
      if (n > 0) f(0, n);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = &f;
      n_ = n;
      parts_ = parts;
      pending_.store(static_cast<int>(parts - 1), std::memory_order_relaxed);
      generation_++;
    }
    cv_.notify_all();
    run(f, n, parts, 0);
    // The caller's chunk is done; wait (spinning briefly, then yielding) for the others.
    for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; spins++)
      if (spins > 2000) std::this_thread::yield();
  }

  ~Pool() { stop(); }

 private:
  Pool() {}

  static void run(const std::function<void(int64_t, int64_t)>& job, int64_t n, int64_t parts, int64_t part) {
    const int64_t begin = n * part / parts, end = n * (part + 1) / parts;
    inside_ = true;
    job(begin, end);
    inside_ = false;
  }

  void loop(int part, uint64_t seen) {
    for (;;) {
      const std::function<void(int64_t, int64_t)>* job;
      int64_t n, parts;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return quit_ || generation_ != seen; });
        if (quit_) return;
        seen = generation_;
        job = job_;
        n = n_;
        parts = parts_;
      }
      // A worker past the job's parts sits it out; a worker in it cannot miss it (the caller waits
      // for every part before the next job).
      if (part < parts) {
        run(*job, n, parts, part);
        pending_.fetch_sub(1, std::memory_order_release);
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
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
  bool quit_ = false;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t n_ = 0, parts_ = 0;
  std::atomic<int> pending_{0};
  static thread_local bool inside_;
};

inline thread_local bool Pool::inside_ = false;

inline void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f) {
  Pool::get().parallel_for(n, grain, f);
}

}  // namespace levanter
