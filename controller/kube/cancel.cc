#include "controller/kube/cancel.h"

#include <utility>
#include <vector>

namespace tandem::controller::kube {

void CancelToken::Cancel() {
  std::unique_lock<std::mutex> lock(mu_);
  if (cancelled_) return;
  cancelled_ = true;
  // Callbacks run under the lock so Unregister() can promise "not running and will not run".
  for (auto& [id, callback] : callbacks_) callback();
  callbacks_.clear();
}

bool CancelToken::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

uint64_t CancelToken::Register(std::function<void()> on_cancel) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_id_++;
  if (cancelled_) {
    on_cancel();
  } else {
    callbacks_.emplace(id, std::move(on_cancel));
  }
  return id;
}

void CancelToken::Unregister(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  callbacks_.erase(id);
}

}  // namespace tandem::controller::kube
