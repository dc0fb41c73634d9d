#pragma once
// Interruptible waiting on an injected Clock. A thread that must wait "until the clock says T"
// cannot block on a FakeClock, so waits are real-time condition-variable waits of at most
// kMaxRealWait that re-read the clock: a test that advances a FakeClock is noticed within that
// slice, and production (SteadyClock) waits end on time.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "common/clock.h"

namespace tandem::controller::runtime {

// The longest real-time slice a clock wait blocks before it re-reads the injected clock.
inline constexpr std::chrono::milliseconds kMaxRealWait(20);

// Real time to block on a condition variable when the injected clock says `remaining_nanos` are left.
inline std::chrono::nanoseconds RealWaitSlice(int64_t remaining_nanos) {
  auto remaining = std::chrono::nanoseconds(remaining_nanos);
  return remaining < kMaxRealWait ? remaining : std::chrono::nanoseconds(kMaxRealWait);
}

// Sleeps on `clock` until a deadline or until Interrupt(). Thread-safe; the clock must outlive it.
class Sleeper {
 public:
  explicit Sleeper(const Clock& clock) : clock_(clock) {}

  // Blocks until clock.NowNanos() >= deadline_nanos. Returns false (at once) if interrupted.
  bool SleepUntil(int64_t deadline_nanos) {
    std::unique_lock<std::mutex> lock(mu_);
    while (!interrupted_) {
      int64_t now = clock_.NowNanos();
      if (now >= deadline_nanos) return true;
      cv_.wait_for(lock, RealWaitSlice(deadline_nanos - now));
    }
    return false;
  }
  bool SleepFor(std::chrono::nanoseconds d) { return SleepUntil(clock_.NowNanos() + d.count()); }

  // Wakes every sleeper; this and later sleeps return false. Permanent.
  void Interrupt() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      interrupted_ = true;
    }
    cv_.notify_all();
  }
  bool interrupted() const {
    std::lock_guard<std::mutex> lock(mu_);
    return interrupted_;
  }

  const Clock& clock() const { return clock_; }

 private:
  const Clock& clock_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool interrupted_ = false;
};

}  // namespace tandem::controller::runtime
