#include "controller/runtime/workqueue.h"

#include "controller/runtime/clock_wait.h"

namespace tandem::controller::runtime {

WorkQueue::WorkQueue(std::string name, const Clock& clock, std::unique_ptr<RateLimiter> limiter,
                     WorkQueueMetricsHooks hooks)
    : name_(std::move(name)), clock_(clock), limiter_(std::move(limiter)), hooks_(std::move(hooks)) {}

WorkQueue::~WorkQueue() { ShutDown(); }

void WorkQueue::Add(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  PromoteReadyLocked();
  AddLocked(key);
}

void WorkQueue::AddLocked(const std::string& key) {
  if (shutting_down_) return;
  ++adds_;
  if (hooks_.on_add) hooks_.on_add();
  if (!dirty_.insert(key).second) return;  // already waiting to be processed
  if (processing_.count(key)) return;      // Done re-queues it
  queue_.push_back(key);
  queued_at_[key] = clock_.NowNanos();
  ReportDepthLocked();
  cv_.notify_one();
}

void WorkQueue::AddAfter(const std::string& key, std::chrono::nanoseconds delay) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shutting_down_) return;
  PromoteReadyLocked();
  if (delay.count() <= 0) {
    AddLocked(key);
    return;
  }
  int64_t ready = clock_.NowNanos() + delay.count();
  auto [it, inserted] = delayed_ready_.emplace(key, ready);
  if (!inserted) {
    if (it->second <= ready) return;  // an earlier wake-up is already pending
    it->second = ready;               // the older heap entry becomes stale
  }
  delayed_.push({ready, key});
  cv_.notify_all();  // a blocked Get may need a shorter wait
}

void WorkQueue::AddRateLimited(const std::string& key) {
  std::chrono::nanoseconds delay(0);
  if (limiter_) delay = limiter_->When(key);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutting_down_) return;
    ++retries_;
    if (hooks_.on_retry) hooks_.on_retry();
  }
  AddAfter(key, delay);
}

void WorkQueue::Forget(const std::string& key) {
  if (limiter_) limiter_->Forget(key);
}

int WorkQueue::NumRequeues(const std::string& key) { return limiter_ ? limiter_->NumRequeues(key) : 0; }

void WorkQueue::PromoteReadyLocked() {
  int64_t now = clock_.NowNanos();
  while (!delayed_.empty() && delayed_.top().ready_nanos <= now) {
    Delayed d = delayed_.top();
    delayed_.pop();
    auto it = delayed_ready_.find(d.key);
    if (it == delayed_ready_.end() || it->second != d.ready_nanos) continue;  // stale entry
    delayed_ready_.erase(it);
    AddLocked(d.key);
  }
}

std::string WorkQueue::PopLocked() {
  std::string key = std::move(queue_.front());
  queue_.pop_front();
  int64_t now = clock_.NowNanos();
  auto it = queued_at_.find(key);
  if (it != queued_at_.end()) {
    if (hooks_.on_queue_latency) hooks_.on_queue_latency(static_cast<double>(now - it->second) * 1e-9);
    queued_at_.erase(it);
  }
  started_at_[key] = now;
  processing_.insert(key);
  dirty_.erase(key);
  ReportDepthLocked();
  return key;
}

std::optional<std::string> WorkQueue::Get() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    PromoteReadyLocked();
    if (!queue_.empty()) return PopLocked();
    if (shutting_down_) return std::nullopt;
    if (delayed_.empty()) {
      cv_.wait(lock);
    } else {
      cv_.wait_for(lock, RealWaitSlice(delayed_.top().ready_nanos - clock_.NowNanos()));
    }
  }
}

std::optional<std::string> WorkQueue::TryGet() {
  std::lock_guard<std::mutex> lock(mu_);
  PromoteReadyLocked();
  if (queue_.empty()) return std::nullopt;
  return PopLocked();
}

void WorkQueue::Done(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto started = started_at_.find(key);
  if (started != started_at_.end()) {
    if (hooks_.on_work_duration) {
      hooks_.on_work_duration(static_cast<double>(clock_.NowNanos() - started->second) * 1e-9);
    }
    started_at_.erase(started);
  }
  if (processing_.erase(key) == 0) return;
  if (dirty_.count(key)) {
    queue_.push_back(key);
    queued_at_[key] = clock_.NowNanos();
    ReportDepthLocked();
    cv_.notify_one();
  }
}

void WorkQueue::ShutDown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutting_down_ = true;
    delayed_ = {};
    delayed_ready_.clear();
  }
  cv_.notify_all();
}

bool WorkQueue::ShuttingDown() const {
  std::lock_guard<std::mutex> lock(mu_);
  return shutting_down_;
}

int64_t WorkQueue::Len() {
  std::lock_guard<std::mutex> lock(mu_);
  PromoteReadyLocked();
  return static_cast<int64_t>(queue_.size());
}

WorkQueueStats WorkQueue::Stats() {
  std::lock_guard<std::mutex> lock(mu_);
  PromoteReadyLocked();
  WorkQueueStats s;
  s.depth = static_cast<int64_t>(queue_.size());
  s.processing = static_cast<int64_t>(processing_.size());
  s.waiting = static_cast<int64_t>(delayed_ready_.size());
  s.adds = adds_;
  s.retries = retries_;
  return s;
}

void WorkQueue::ReportDepthLocked() {
  if (hooks_.on_depth) hooks_.on_depth(static_cast<int64_t>(queue_.size()));
}

}  // namespace tandem::controller::runtime
