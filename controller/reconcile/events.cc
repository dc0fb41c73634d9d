#include "controller/reconcile/events.h"

#include "common/logging.h"
#include "controller/reconcile/conditions.h"

namespace tandem::controller::reconcile {

EventRecorder::EventRecorder(ObjectStore* store, std::string component, std::function<int64_t()> unix_seconds,
                             int64_t dedup_window_s)
    : store_(store),
      component_(std::move(component)),
      unix_seconds_(std::move(unix_seconds)),
      dedup_window_s_(dedup_window_s) {}

void EventRecorder::Record(const json& object, std::string_view type, std::string_view reason,
                           std::string_view message) {
  FieldReader r(object);
  std::string uid = r.String("/metadata/uid", "");
  std::string name = r.String("/metadata/name", "");
  std::string ns = r.String("/metadata/namespace", "default");
  int64_t now = unix_seconds_();
  std::string key = uid + "|" + std::string(reason) + "|" + std::string(message);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = last_seen_.find(key);
    if (it != last_seen_.end() && now - it->second < dedup_window_s_) {
      ++suppressed_;
      return;
    }
    last_seen_[key] = now;
    ++recorded_;
    if (last_seen_.size() > 10'000) last_seen_.clear();  // bound memory; at worst one repeat
  }
  std::string stamp = Rfc3339(now);
  json event = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"name", name + "." + ContentHash(key + stamp)}, {"namespace", ns}}},
      {"involvedObject",
       {{"apiVersion", r.String("/apiVersion", "")},
        {"kind", r.String("/kind", "")},
        {"name", name},
        {"namespace", ns},
        {"uid", uid},
        {"resourceVersion", r.String("/metadata/resourceVersion", "")}}},
      {"type", type},
      {"reason", reason},
      {"message", message},
      {"source", {{"component", component_}}},
      {"reportingComponent", component_},
      {"firstTimestamp", stamp},
      {"lastTimestamp", stamp},
      {"count", 1},
  };
  StatusOr<json> created = store_->Create(Kind::kEvent, event);
  if (!created.ok()) {
    TANDEM_LOG(Warning) << "event " << reason << " for " << ns << "/" << name
                        << " not recorded: " << created.status().ToString();
  }
}

int64_t EventRecorder::recorded() const {
  std::lock_guard<std::mutex> lock(mu_);
  return recorded_;
}

int64_t EventRecorder::suppressed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return suppressed_;
}

void RecordTransitions(EventRecorder* events, const json& object, const json& before, const json& after) {
  bool was_ready = ConditionIsTrue(before, kReady), is_ready = ConditionIsTrue(after, kReady);
  const json* ready = FindCondition(after, kReady);
  if (ready != nullptr && was_ready != is_ready) {
    events->Record(object, is_ready ? kEventNormal : kEventWarning, is_ready ? "Ready" : "NotReady",
                   StringField(*ready, "message"));
  }
  const json* degraded = FindCondition(after, kDegraded);
  if (degraded != nullptr && ConditionIsTrue(after, kDegraded) &&
      (!ConditionIsTrue(before, kDegraded) ||
       StringField(*FindCondition(before, kDegraded), "reason") != StringField(*degraded, "reason"))) {
    std::string reason = StringField(*degraded, "reason");
    events->Record(object, kEventWarning, reason.empty() ? "Degraded" : reason,
                   StringField(*degraded, "message"));
  }
}

}  // namespace tandem::controller::reconcile
