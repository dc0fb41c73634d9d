#pragma once
// Kubernetes Events (core/v1) for the transitions operators care about: children created, a
// deployment or pool becoming Ready or not, Degraded with its reason, an invalid spec.
//
// De-duplicated: an event with the same object uid, reason and message as one recorded in the
// last `dedup_window_s` is dropped, so a reconcile loop retrying the same failure does not flood
// the API server. Failures to write an event are logged, never returned (events are advisory).
// Thread-safe.

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "controller/reconcile/apply.h"

namespace tandem::controller::reconcile {

inline constexpr std::string_view kEventNormal = "Normal";
inline constexpr std::string_view kEventWarning = "Warning";

class EventRecorder {
 public:
  // `store` must outlive the recorder; `unix_seconds` is the wall clock (injected in tests).
  EventRecorder(ObjectStore* store, std::string component, std::function<int64_t()> unix_seconds,
                int64_t dedup_window_s = 600);

  // Records an event about `object` (which has apiVersion, kind and metadata).
  void Record(const json& object, std::string_view type, std::string_view reason, std::string_view message);

  int64_t recorded() const;
  int64_t suppressed() const;

 private:
  ObjectStore* const store_;
  const std::string component_;
  const std::function<int64_t()> unix_seconds_;
  const int64_t dedup_window_s_;
  mutable std::mutex mu_;
  std::map<std::string, int64_t> last_seen_;  // uid|reason|message -> unix seconds
  int64_t recorded_ = 0;
  int64_t suppressed_ = 0;
};

// Events for the transitions between the stored status `before` and the computed `after`
// (Ready flipping either way, Degraded turning True), recorded about `object`.
void RecordTransitions(EventRecorder* events, const json& object, const json& before, const json& after);

}  // namespace tandem::controller::reconcile
