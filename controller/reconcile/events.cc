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
  std::string stamp = Rfc3339(now);
  Seen previous;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = last_seen_.find(key);
    if (it != last_seen_.end() && now - it->second.unix_seconds < dedup_window_s_) previous = it->second;
  }
  if (!previous.name.empty() && Increment(previous.ns, previous.name, stamp)) {
    std::lock_guard<std::mutex> lock(mu_);
    last_seen_[key].unix_seconds = now;
    ++suppressed_;
    return;
  }
  std::string event_name = name + "." + ContentHash(key + stamp);
  json event = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"name", event_name}, {"namespace", ns}}},
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
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (last_seen_.size() > 10'000) last_seen_.clear();  // bound memory; at worst a new object
  last_seen_[key] = Seen{now, ns, event_name};
  ++recorded_;
}

bool EventRecorder::Increment(const std::string& ns, const std::string& name, const std::string& stamp) {
  StatusOr<json> live = store_->Get(Kind::kEvent, ns, name);
  if (!live.ok()) return false;  // expired or deleted: the caller creates a new one
  json updated = std::move(*live);
  const json* count = updated.contains("count") ? &updated["count"] : nullptr;
  updated["count"] = (count != nullptr && count->is_number_integer() ? count->get<int64_t>() : 1) + 1;
  updated["lastTimestamp"] = stamp;
  StatusOr<json> written = store_->Update(Kind::kEvent, updated);
  if (!written.ok()) {
    TANDEM_LOG(Warning) << "event " << ns << "/" << name
                        << " count not updated: " << written.status().ToString();
    return false;
  }
  return true;
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
