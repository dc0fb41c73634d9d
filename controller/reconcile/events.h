#pragma once
// Kubernetes Events (core/v1) for the transitions operators care about: children created, a
// deployment or pool becoming Ready or not, Degraded with its reason, an invalid spec.
//
// Aggregated as client-go's correlator does: an event with the same object uid, reason and
// message as one recorded in the last `dedup_window_s` is not a new object; the existing one's
// `count` goes up and its `lastTimestamp` moves (one update), so a repeated decision stays
// countable (`kubectl get events` shows it N times) without an object per repeat. When that
// event is gone or the update fails, a new one is created. Failures to write an event are
// logged, never returned (events are advisory). Thread-safe.

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

  // Event objects created, and repeats folded into an existing event's count.
  int64_t recorded() const;
  int64_t suppressed() const;

 private:
  // Adds one to the event `ns/name`'s count; false when it could not be read or written.
  bool Increment(const std::string& ns, const std::string& name, const std::string& stamp);

  ObjectStore* const store_;
  const std::string component_;
  const std::function<int64_t()> unix_seconds_;
  const int64_t dedup_window_s_;
  mutable std::mutex mu_;
  struct Seen {
    int64_t unix_seconds = 0;  // of the last occurrence
    std::string ns, name;      // the Event object holding it
  };
  std::map<std::string, Seen> last_seen_;  // uid|reason|message -> its event
  int64_t recorded_ = 0;
  int64_t suppressed_ = 0;
};

// Events for the transitions between the stored status `before` and the computed `after`
// (Ready flipping either way, Degraded turning True), recorded about `object`.
void RecordTransitions(EventRecorder* events, const json& object, const json& before, const json& after);

}  // namespace tandem::controller::reconcile
