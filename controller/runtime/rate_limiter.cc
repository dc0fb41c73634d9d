#include "controller/runtime/rate_limiter.h"

#include <algorithm>
#include <cmath>

namespace tandem::controller::runtime {

using std::chrono::nanoseconds;

ItemExponentialFailureRateLimiter::ItemExponentialFailureRateLimiter(nanoseconds base_delay,
                                                                     nanoseconds max_delay)
    : base_delay_(base_delay), max_delay_(max_delay) {}

nanoseconds ItemExponentialFailureRateLimiter::When(const std::string& item) {
  int exp;
  {
    std::lock_guard<std::mutex> lock(mu_);
    exp = failures_[item]++;
  }
  // Compute in floating point so 2^exp cannot overflow an integer after many failures.
  double delay = static_cast<double>(base_delay_.count()) * std::pow(2.0, std::min(exp, 1000));
  if (delay >= static_cast<double>(max_delay_.count())) return max_delay_;
  return nanoseconds(static_cast<int64_t>(delay));
}

void ItemExponentialFailureRateLimiter::Forget(const std::string& item) {
  std::lock_guard<std::mutex> lock(mu_);
  failures_.erase(item);
}

int ItemExponentialFailureRateLimiter::NumRequeues(const std::string& item) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = failures_.find(item);
  return it == failures_.end() ? 0 : it->second;
}

BucketRateLimiter::BucketRateLimiter(const Clock& clock, double qps, int burst)
    : clock_(clock), qps_(qps), burst_(burst), tokens_(burst), last_nanos_(clock.NowNanos()) {}

nanoseconds BucketRateLimiter::When(const std::string&) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t now = clock_.NowNanos();
  if (now > last_nanos_) {
    tokens_ = std::min(burst_, tokens_ + static_cast<double>(now - last_nanos_) * 1e-9 * qps_);
    last_nanos_ = now;
  }
  tokens_ -= 1.0;
  if (tokens_ >= 0.0) return nanoseconds(0);
  // The reserved token arrives after -tokens_ / qps seconds.
  return nanoseconds(static_cast<int64_t>(std::ceil(-tokens_ / qps_ * 1e9)));
}

MaxOfRateLimiter::MaxOfRateLimiter(std::vector<std::unique_ptr<RateLimiter>> limiters)
    : limiters_(std::move(limiters)) {}

nanoseconds MaxOfRateLimiter::When(const std::string& item) {
  nanoseconds longest(0);
  for (auto& limiter : limiters_) longest = std::max(longest, limiter->When(item));
  return longest;
}

void MaxOfRateLimiter::Forget(const std::string& item) {
  for (auto& limiter : limiters_) limiter->Forget(item);
}

int MaxOfRateLimiter::NumRequeues(const std::string& item) {
  int most = 0;
  for (auto& limiter : limiters_) most = std::max(most, limiter->NumRequeues(item));
  return most;
}

std::unique_ptr<RateLimiter> NewDefaultControllerRateLimiter(const Clock& clock) {
  std::vector<std::unique_ptr<RateLimiter>> limiters;
  limiters.push_back(std::make_unique<ItemExponentialFailureRateLimiter>(std::chrono::milliseconds(5),
                                                                         std::chrono::seconds(1000)));
  limiters.push_back(std::make_unique<BucketRateLimiter>(clock, 10.0, 100));
  return std::make_unique<MaxOfRateLimiter>(std::move(limiters));
}

}  // namespace tandem::controller::runtime
