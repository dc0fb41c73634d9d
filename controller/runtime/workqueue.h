#pragma once
// A rate-limited, delaying work queue of string keys ("namespace/name") with client-go's
// semantics:
//  - Add de-duplicates: a key waiting in the queue is queued once however often it is added.
//  - A key handed out by Get is "processing" until Done; no second worker gets it meanwhile. If it
//    is added again while processing it is marked dirty and re-queued when Done is called.
//  - AddAfter holds a key back until the injected clock passes the delay; AddRateLimited asks the
//    RateLimiter for the delay (per-item backoff, overall bucket); Forget resets the backoff.
//  - ShutDown stops new adds and wakes blocked Gets; Get still drains keys already queued and
//    returns nullopt once the queue is empty.
//
// Typical worker:
//   while (auto key = queue.Get()) {
//     Status s = Reconcile(*key);
//     if (s.ok()) queue.Forget(*key); else queue.AddRateLimited(*key);
//     queue.Done(*key);
//   }
//
// Thread-safe. Time comes from the injected Clock: with a FakeClock, a delayed key becomes ready
// once the test advances the clock and then calls any queue method (Len, TryGet, Get, ...), or
// within kMaxRealWait for a Get already blocked.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/clock.h"
#include "controller/runtime/rate_limiter.h"

namespace tandem::controller::runtime {

// Optional metric hooks; each may be empty. They run under the queue's lock: keep them quick
// (bump a counter, observe a histogram) and never call back into the queue.
struct WorkQueueMetricsHooks {
  std::function<void(int64_t depth)> on_depth;           // queued (ready) keys after each change
  std::function<void()> on_add;                          // each accepted Add (after de-dup: each call)
  std::function<void()> on_retry;                        // each AddRateLimited
  std::function<void(double seconds)> on_queue_latency;  // time from queued to handed out by Get
  std::function<void(double seconds)> on_work_duration;  // time from Get to Done
};

// Counters since construction, for tests and the metrics code.
struct WorkQueueStats {
  int64_t depth = 0;       // keys queued and ready (Len())
  int64_t processing = 0;  // keys handed out and not yet Done
  int64_t waiting = 0;     // keys held back by AddAfter / AddRateLimited
  int64_t adds = 0;        // Add calls accepted (before de-dup), including delayed ones becoming ready
  int64_t retries = 0;     // AddRateLimited calls
};

class WorkQueue {
 public:
  // `clock` must outlive the queue. `limiter` may be null: then AddRateLimited is Add.
  WorkQueue(std::string name, const Clock& clock, std::unique_ptr<RateLimiter> limiter,
            WorkQueueMetricsHooks hooks = {});
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues `key` unless it is already queued; if it is processing, re-queues it after Done.
  // Ignored after ShutDown.
  void Add(const std::string& key);
  // Adds `key` once `delay` has passed on the clock (at once if delay <= 0). Several pending
  // delays for one key keep the earliest.
  void AddAfter(const std::string& key, std::chrono::nanoseconds delay);
  // AddAfter(key, limiter->When(key)): counts one retry of `key`.
  void AddRateLimited(const std::string& key);
  // Resets `key`'s backoff in the rate limiter (it does not remove the key from the queue).
  void Forget(const std::string& key);
  // Retries counted for `key` since its last Forget.
  int NumRequeues(const std::string& key);

  // Blocks until a key is ready and returns it (now "processing"), or returns nullopt once the
  // queue is shut down and empty. REQUIRES: the caller calls Done(key) when finished.
  std::optional<std::string> Get();
  // Like Get but never blocks: nullopt when nothing is ready.
  std::optional<std::string> TryGet();
  // Marks `key` finished; if it was added while processing it goes back into the queue.
  void Done(const std::string& key);

  // Stops accepting adds, drops held-back keys and wakes every blocked Get.
  void ShutDown();
  bool ShuttingDown() const;

  // Keys queued and ready (not processing, not held back).
  int64_t Len();
  WorkQueueStats Stats();
  const std::string& name() const { return name_; }

 private:
  struct Delayed {
    int64_t ready_nanos;
    std::string key;
    bool operator>(const Delayed& o) const { return ready_nanos > o.ready_nanos; }
  };

  void AddLocked(const std::string& key);
  void PromoteReadyLocked();  // moves due delayed keys into the queue
  std::string PopLocked();    // REQUIRES: !queue_.empty()
  void ReportDepthLocked();

  const std::string name_;
  const Clock& clock_;
  const std::unique_ptr<RateLimiter> limiter_;
  const WorkQueueMetricsHooks hooks_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;                        // ready keys in FIFO order
  std::unordered_set<std::string> dirty_;                // keys needing processing
  std::unordered_set<std::string> processing_;           // keys handed out, not Done
  std::unordered_map<std::string, int64_t> queued_at_;   // for queue latency
  std::unordered_map<std::string, int64_t> started_at_;  // for work duration
  std::priority_queue<Delayed, std::vector<Delayed>, std::greater<Delayed>> delayed_;
  std::unordered_map<std::string, int64_t> delayed_ready_;  // earliest pending ready time per key
  bool shutting_down_ = false;
  int64_t adds_ = 0;
  int64_t retries_ = 0;
};

}  // namespace tandem::controller::runtime
