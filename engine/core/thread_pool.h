#pragma once
// A small fixed-size thread pool for the CPU kernels: ParallelFor splits [0, n) into num_threads()
// contiguous chunks and the calling thread works too. No allocation per call: kernels split work
// evenly (rows of a weight matrix), so a static split is what they want. Threads claim the chunks
// from a shared counter: the caller runs its own chunk and then any chunk no worker has started,
// so a worker the OS has not scheduled (a busy, shared machine) delays nothing. Workers spin for
// a short while (kSpinMicros) after each job before sleeping on the condition variable, and so
// does the caller on chunks still running: a decode step issues hundreds of small ParallelFors
// back to back, and a futex wake-up per call cost more than the work (docs/performance.md,
// "Model runtime").

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

  // Calls fn(begin, end, chunk_index) on disjoint chunks covering [0, n), chunk boundaries at
  // multiples of `grain` (except the last), and returns when all chunks are done. chunk_index is
  // in [0, num_threads()) and each index runs once, on one thread: per-index scratch is safe.
  // One ParallelFor at a time per pool (callers serialize; the engine owns one pool per worker).
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn);

 private:
  void WorkerLoop();

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  // How long a worker polls for the next job, and the caller for running chunks, before sleeping.
  static constexpr int64_t kSpinMicros = 200;

  // Claims the next unstarted chunk of job `generation`; -1 when none is left (or the job is over).
  int ClaimChunk(uint32_t generation);
  // Runs chunks of the job until none is left to claim.
  void RunChunks(uint32_t generation, const std::function<void(int64_t, int64_t, int)>& fn, int64_t n,
                 int64_t grain);

  // Written under mu_ before the generation is published; read under mu_ by workers.
  const std::function<void(int64_t, int64_t, int)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_grain_ = 1;
  std::atomic<uint32_t> generation_{0};
  // (generation << 32) | next chunk to claim: a claim is valid only for the job it was made in.
  std::atomic<uint64_t> claim_{0};
  std::atomic<int> chunks_left_{0};  // chunks of the current job not finished
  std::atomic<bool> stop_{false};
};

// The chunk [begin, end) that thread `index` of `threads` owns when [0, n) is split in
// grain-aligned, near-equal parts.
void SplitRange(int64_t n, int64_t grain, int threads, int index, int64_t* begin, int64_t* end);

}  // namespace tandem::engine
