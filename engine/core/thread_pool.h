#pragma once
// A small fixed-size thread pool for the CPU kernels: ParallelFor splits [0, n) into contiguous
// chunks, one per thread, and the calling thread works too. No work stealing, no allocation per
// call: kernels split work evenly (rows of a weight matrix), so a static split is what they want.
// Workers spin for a short while (kSpinMicros) after each job before sleeping on the condition
// variable, and the caller spins on the last chunks before it sleeps: a decode step issues
// hundreds of small ParallelFors back to back, and a futex wake-up per call cost more than the
// work itself (docs/performance.md, "Model runtime").

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tandem::engine {

class ThreadPool {
 public:
  // num_threads counts the caller: ThreadPool(1) runs everything inline.
  // REQUIRES: num_threads >= 1.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end, thread_index) on disjoint chunks covering [0, n), chunk boundaries at
  // multiples of `grain` (except the last), and returns when all chunks are done. One ParallelFor
  // at a time per pool (callers serialize; the engine owns one pool per worker).
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn);

 private:
  void WorkerLoop(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  // How long a worker polls for the next job, and the caller for the last chunk, before sleeping.
  static constexpr int64_t kSpinMicros = 200;

  // Written under mu_; generation_, pending_ and stop_ are also polled without it while spinning.
  const std::function<void(int64_t, int64_t, int)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_grain_ = 1;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

// The chunk [begin, end) that thread `index` of `threads` owns when [0, n) is split in
// grain-aligned, near-equal parts.
void SplitRange(int64_t n, int64_t grain, int threads, int index, int64_t* begin, int64_t* end);

}  // namespace tandem::engine
