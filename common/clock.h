#pragma once
// Injectable clocks: production code asks a Clock for the time so tests can drive it by hand
// (hermetic tests, no sleeps to wait for a timeout).

#include <atomic>
#include <chrono>
#include <cstdint>

namespace tandem {

// Monotonic nanoseconds since an unspecified epoch.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowNanos() const = 0;
  double NowSeconds() const { return static_cast<double>(NowNanos()) * 1e-9; }
};

// std::chrono::steady_clock.
class SteadyClock final : public Clock {
 public:
  int64_t NowNanos() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  // A process-wide instance for code that is not handed a clock.
  static const Clock& Default() {
    static const SteadyClock clock;
    return clock;
  }
};

// A clock that moves only when told to. Thread-safe.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t start_nanos = 0) : now_nanos_(start_nanos) {}
  int64_t NowNanos() const override { return now_nanos_.load(std::memory_order_acquire); }
  void AdvanceNanos(int64_t delta_nanos) { now_nanos_.fetch_add(delta_nanos, std::memory_order_acq_rel); }
  void AdvanceMillis(int64_t delta_ms) { AdvanceNanos(delta_ms * 1'000'000); }

 private:
  std::atomic<int64_t> now_nanos_;
};

}  // namespace tandem
