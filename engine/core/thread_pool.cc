#include "engine/core/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#endif

namespace tandem::engine {
namespace {

void CpuRelax() {
#if defined(__x86_64__) || defined(_M_X64)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Polls `done` for up to `micros`; true once it holds.
template <typename Pred>
bool SpinUntil(Pred done, int64_t micros) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(micros);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      CpuRelax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}

}  // namespace

void SplitRange(int64_t n, int64_t grain, int threads, int index, int64_t* begin, int64_t* end) {
  grain = std::max<int64_t>(grain, 1);
  const int64_t units = (n + grain - 1) / grain;
  const int64_t base = units / threads, extra = units % threads;
  const int64_t first = index * base + std::min<int64_t>(index, extra);
  const int64_t count = base + (index < extra ? 1 : 0);
  *begin = std::min(n, first * grain);
  *end = std::min(n, (first + count) * grain);
}

ThreadPool::ThreadPool(int num_threads) {
  for (int i = 1; i < std::max(num_threads, 1); ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  start_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

int ThreadPool::ClaimChunk(uint32_t generation) {
  uint64_t cur = claim_.load(std::memory_order_acquire);
  for (;;) {
    const int next = static_cast<int>(cur & 0xffffffffu);
    if (static_cast<uint32_t>(cur >> 32) != generation || next >= num_threads()) return -1;
    if (claim_.compare_exchange_weak(cur, cur + 1, std::memory_order_acq_rel)) return next;
  }
}

void ThreadPool::RunChunks(uint32_t generation, const std::function<void(int64_t, int64_t, int)>& fn,
                           int64_t n, int64_t grain) {
  for (int chunk; (chunk = ClaimChunk(generation)) >= 0;) {
    int64_t begin, end;
    SplitRange(n, grain, num_threads(), chunk, &begin, &end);
    if (begin < end) fn(begin, end, chunk);
    if (chunks_left_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // Notified under the lock: the caller, once it sees no chunk left, takes the lock before
      // returning, so the pool cannot be destroyed while this notify runs.
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::WorkerLoop() {
  uint32_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t, int)>* job;
    int64_t n, grain;
    // Poll first: the next job usually follows within microseconds.
    SpinUntil(
        [&] {
          return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen;
        },
        kSpinMicros);
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
      if (stop_.load()) return;
      seen = generation_.load();
      job = job_;
      n = job_n_;
      grain = job_grain_;
    }
    // A stale snapshot (the caller finished this job alone and started another) claims nothing:
    // claims carry the generation.
    RunChunks(seen, *job, n, grain);
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n <= grain) {
    fn(0, n, 0);
    return;
  }
  uint32_t generation;
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_n_ = n;
    job_grain_ = grain;
    generation = generation_.load() + 1;
    chunks_left_.store(num_threads());
    claim_.store(static_cast<uint64_t>(generation) << 32);
    generation_.store(generation);
  }
  start_cv_.notify_all();
  RunChunks(generation, fn, n, grain);
  SpinUntil([&] { return chunks_left_.load(std::memory_order_acquire) == 0; }, kSpinMicros);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return chunks_left_.load() == 0; });
}

}  // namespace tandem::engine
