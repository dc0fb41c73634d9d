#pragma once
// A thread-safe "stop now" signal for blocking calls (watch streams, long requests): another
// thread calls Cancel() and the blocked call returns Cancelled promptly.

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

namespace tandem::controller::kube {

class CancelToken {
 public:
  CancelToken() = default;
  CancelToken(const CancelToken&) = delete;
  CancelToken& operator=(const CancelToken&) = delete;

  // Marks the token cancelled and runs every registered callback once. Idempotent; thread-safe.
  void Cancel();
  bool cancelled() const;

  // Registers `on_cancel` (run at once, on this thread, when already cancelled). Returns an id for
  // Unregister. Callbacks run on the cancelling thread and must not block or re-enter the token.
  uint64_t Register(std::function<void()> on_cancel);
  // After Unregister returns, the callback is not running and will not run.
  void Unregister(uint64_t id);

 private:
  mutable std::mutex mu_;
  bool cancelled_ = false;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::function<void()>> callbacks_;
};

}  // namespace tandem::controller::kube
