#pragma once
// Rate limiters for the controller work queue, with client-go's semantics: a per-item exponential
// failure backoff, an overall token bucket, and the max of several (the default controller rate
// limiter is max(exponential 5 ms → 1000 s, bucket 10 qps burst 100)).

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"

namespace tandem::controller::runtime {

// Decides how long an item must wait before it is processed again. Thread-safe.
class RateLimiter {
 public:
  virtual ~RateLimiter() = default;
  // Records one more retry of `item` and returns how long it must wait (>= 0).
  virtual std::chrono::nanoseconds When(const std::string& item) = 0;
  // Stops tracking `item`: its failure count resets (call after it succeeds).
  virtual void Forget(const std::string& item) = 0;
  // How many times When(item) was called since the last Forget(item).
  virtual int NumRequeues(const std::string& item) = 0;
};

// Per-item backoff: base * 2^failures, capped at max_delay. Failures count per item until Forget.
class ItemExponentialFailureRateLimiter final : public RateLimiter {
 public:
  // REQUIRES: 0 < base_delay <= max_delay.
  ItemExponentialFailureRateLimiter(std::chrono::nanoseconds base_delay, std::chrono::nanoseconds max_delay);
  std::chrono::nanoseconds When(const std::string& item) override;
  void Forget(const std::string& item) override;
  int NumRequeues(const std::string& item) override;

 private:
  const std::chrono::nanoseconds base_delay_;
  const std::chrono::nanoseconds max_delay_;
  std::mutex mu_;
  std::unordered_map<std::string, int> failures_;
};

// An overall token bucket shared by all items (golang.org/x/time/rate reservation semantics):
// `burst` tokens at first, refilled at `qps`; each When() takes a token now or reserves the next
// one, returning the wait until it is due. Items are not tracked: Forget is a no-op and
// NumRequeues is 0. Time comes from `clock`, which must outlive the limiter.
class BucketRateLimiter final : public RateLimiter {
 public:
  // REQUIRES: qps > 0, burst >= 1.
  BucketRateLimiter(const Clock& clock, double qps, int burst);
  std::chrono::nanoseconds When(const std::string& item) override;
  void Forget(const std::string&) override {}
  int NumRequeues(const std::string&) override { return 0; }

 private:
  const Clock& clock_;
  const double qps_;
  const double burst_;
  std::mutex mu_;
  double tokens_;       // may go negative: tokens reserved ahead of time
  int64_t last_nanos_;  // when `tokens_` was last brought up to date
};

// The longest wait any of `limiters` asks for; Forget forgets in all of them, NumRequeues is the
// largest count. Owns the limiters.
class MaxOfRateLimiter final : public RateLimiter {
 public:
  explicit MaxOfRateLimiter(std::vector<std::unique_ptr<RateLimiter>> limiters);
  std::chrono::nanoseconds When(const std::string& item) override;
  void Forget(const std::string& item) override;
  int NumRequeues(const std::string& item) override;

 private:
  std::vector<std::unique_ptr<RateLimiter>> limiters_;
};

// client-go's DefaultControllerRateLimiter: max(exponential 5 ms doubling to 1000 s per item,
// bucket 10 qps with burst 100 overall). `clock` must outlive the limiter.
std::unique_ptr<RateLimiter> NewDefaultControllerRateLimiter(const Clock& clock);

}  // namespace tandem::controller::runtime
