#include "controller/reconcile/pool_status.h"

#include "controller/reconcile/conditions.h"
#include "controller/reconcile/pool_plan.h"

namespace tandem::controller::reconcile {
std::string PodUnschedulableMessage(const json& pod) {
  FieldReader r(pod);
  const json* status = r.Object("/status");
  if (status == nullptr) return "";
  auto conditions = status->find("conditions");
  if (conditions == status->end() || !conditions->is_array()) return "";
  for (const json& c : *conditions) {
    if (StringField(c, "type") != "PodScheduled") continue;
    if (StringField(c, "status") == "False" && StringField(c, "reason") == "Unschedulable") {
      std::string message = StringField(c, "message");
      return message.empty() ? "unschedulable" : message;
    }
  }
  return "";
}

bool PodReady(const json& pod) {
  const json* status = FieldReader(pod).Object("/status");
  const json* ready = status == nullptr ? nullptr : FindCondition(*status, "Ready");
  return ready != nullptr && StringField(*ready, "status") == "True";
}

json ComputePoolStatus(const PoolObservation& o, std::string_view now) {
  FieldReader r(*o.pool);
  int64_t generation = r.Int("/metadata/generation", 0);
  const int64_t desired = o.desired;
  std::string deployment = r.String("/spec/deploymentName", "");
  std::string role = r.String("/spec/role", "");

  int64_t replicas = 0, ready = 0;
  bool rolling = true;
  if (o.statefulset != nullptr) {
    FieldReader s(*o.statefulset);
    replicas = s.Int("/status/replicas", 0);
    ready = s.Int("/status/readyReplicas", 0);
    int64_t updated = s.Int("/status/updatedReplicas", replicas);
    bool observed = s.Int("/status/observedGeneration", 0) >= s.Int("/metadata/generation", 0);
    std::string current = s.String("/status/currentRevision", "");
    std::string update = s.String("/status/updateRevision", current);
    rolling = !observed || s.Int("/spec/replicas", 1) != desired || replicas != desired ||
              updated < desired || current != update;
  }

  int unschedulable = 0;
  std::string capacity_message;
  for (const json* pod : o.pods) {
    std::string m = PodUnschedulableMessage(*pod);
    if (m.empty()) continue;
    if (unschedulable++ == 0) capacity_message = m;
  }
  if (unschedulable > 0) {
    capacity_message = std::to_string(unschedulable) + " pod(s) cannot be scheduled: " + capacity_message;
  }
  std::string ready_message = std::to_string(ready) + "/" + std::to_string(desired) + " replicas ready";

  std::vector<Condition> conditions;
  if (!o.plan.ok()) {
    conditions = InvalidSpecConditions(o.plan.message());
  } else {
    bool all_ready = o.statefulset != nullptr && !rolling && ready >= desired;
    if (all_ready) {
      conditions.push_back({std::string(kReady), true, std::string(kReasonAllReplicasReady), ready_message});
    } else if (unschedulable > 0) {
      conditions.push_back(
          {std::string(kReady), false, std::string(kReasonInsufficientCapacity), capacity_message});
    } else {
      conditions.push_back({std::string(kReady), false, std::string(kReasonPodsNotReady), ready_message});
    }
    conditions.push_back(
        rolling ? Condition{std::string(kProgressing), true, std::string(kReasonRolloutInProgress),
                            std::to_string(replicas) + " of " + std::to_string(desired) +
                                " replicas at the current revision"}
                : Condition{std::string(kProgressing), false, std::string(kReasonRolloutComplete),
                            "the StatefulSet matches the spec"});
    if (!o.not_owned.empty()) {
      std::string m = "refusing to adopt objects owned by someone else:";
      for (const std::string& n : o.not_owned) m += " " + n;
      conditions.push_back({std::string(kDegraded), true, std::string(kReasonResourceNotOwned), m});
    } else if (unschedulable > 0) {
      conditions.push_back(
          {std::string(kDegraded), true, std::string(kReasonInsufficientCapacity), capacity_message});
    } else {
      conditions.push_back({std::string(kDegraded), false, std::string(kReasonAsExpected), "no faults"});
    }
  }
  json status = {{"observedGeneration", generation},
                 {"replicas", replicas},
                 {"readyReplicas", ready},
                 {"conditions", MergeConditions(StoredConditions(*o.pool), conditions, generation, now)}};
  if (!deployment.empty() && !role.empty()) status["selector"] = PoolSelectorString(deployment, role);
  return status;
}

}  // namespace tandem::controller::reconcile
