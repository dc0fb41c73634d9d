#include "controller/reconcile/deployment_status.h"

#include "controller/reconcile/conditions.h"
#include "controller/reconcile/deployment_spec.h"
#include "controller/reconcile/quality_gate.h"

namespace tandem::controller::reconcile {
namespace {

struct Part {
  std::string name;  // "prefill", "decode", "router"
  int64_t desired = 0;
  int64_t replicas = 0;
  int64_t ready = 0;
  bool current = false;  // the part exists and its status is for its current spec
  bool is_ready = false;
  std::string degraded_reason;  // a pool's Degraded reason when True
  std::string degraded_message;

  json Summary() const {
    return json{{"replicas", replicas},
                {"readyReplicas", ready},
                {"ready", std::to_string(ready) + "/" + std::to_string(desired)}};
  }
};

Part PoolPart(std::string name, int64_t desired, const json* pool) {
  Part p;
  p.name = std::move(name);
  p.desired = desired;
  if (pool == nullptr) return p;
  FieldReader r(*pool);
  p.replicas = r.Int("/status/replicas", 0);
  p.ready = r.Int("/status/readyReplicas", 0);
  p.current = r.Int("/status/observedGeneration", -1) == r.Int("/metadata/generation", 0);
  json status = pool->value("status", json::object());
  // Ready counts only with the replicas this deployment wants: a pool read from a cache that has
  // not seen the latest spec yet says Ready for its old size.
  p.is_ready = p.current && ConditionIsTrue(status, kReady) && p.ready >= p.desired;
  if (p.current && ConditionIsTrue(status, kDegraded)) {
    const json* c = FindCondition(status, kDegraded);
    p.degraded_reason = StringField(*c, "reason");
    if (p.degraded_reason.empty()) p.degraded_reason = "PoolDegraded";
    p.degraded_message = p.name + ": " + StringField(*c, "message");
  }
  return p;
}

Part RouterPart(int64_t desired, const json* router) {
  Part p;
  p.name = "router";
  p.desired = desired;
  if (router == nullptr) return p;
  FieldReader r(*router);
  p.replicas = r.Int("/status/replicas", 0);
  p.ready = r.Int("/status/readyReplicas", 0);
  p.current = r.Int("/status/observedGeneration", 0) >= r.Int("/metadata/generation", 0) &&
              r.Int("/spec/replicas", 1) == p.desired;
  p.is_ready = p.current && p.ready >= p.desired && r.Int("/status/updatedReplicas", p.ready) >= p.desired;
  return p;
}

}  // namespace

int64_t DesiredReplicas(const json* pool, int64_t from_deployment) {
  if (pool == nullptr) return from_deployment;
  StatusOr<ModelPoolSpec> spec = ParseModelPoolSpec(*pool, PlanOptions{});
  return spec.ok() ? spec->pool.replicas : from_deployment;
}

json ComputeDeploymentStatus(const DeploymentObservation& o, std::string_view now) {
  const json& mdep = *o.deployment;
  int64_t generation = FieldReader(mdep).Int("/metadata/generation", 0);
  std::vector<Part> parts = {PoolPart("prefill", o.prefill_desired, o.prefill),
                             PoolPart("decode", o.decode_desired, o.decode),
                             RouterPart(o.router_desired, o.router)};

  std::vector<Condition> conditions;
  if (!o.plan.ok()) {
    conditions = InvalidSpecConditions(o.plan.message());
  } else {
    bool all_ready = true, all_current = true;
    std::string not_ready, stale, capacity;
    const Part* degraded = nullptr;
    for (const Part& p : parts) {
      if (!p.is_ready)
        not_ready += (not_ready.empty() ? "" : ", ") + p.name + " " + p.Summary()["ready"].get<std::string>();
      if (!p.current) stale += (stale.empty() ? "" : ", ") + p.name;
      all_ready = all_ready && p.is_ready;
      all_current = all_current && p.current;
      if (!p.degraded_reason.empty() && degraded == nullptr) degraded = &p;
    }
    bool no_capacity = degraded != nullptr && degraded->degraded_reason == kReasonInsufficientCapacity;
    if (all_ready) {
      conditions.push_back({std::string(kReady), true, std::string(kReasonAllPoolsReady),
                            "prefill, decode and router are ready"});
    } else if (no_capacity) {
      conditions.push_back(
          {std::string(kReady), false, std::string(kReasonInsufficientCapacity), degraded->degraded_message});
    } else {
      conditions.push_back(
          {std::string(kReady), false, std::string(kReasonPodsNotReady), "not ready: " + not_ready});
    }
    conditions.push_back(
        all_current ? Condition{std::string(kProgressing), false, std::string(kReasonRolloutComplete),
                                "every pool runs the current spec"}
                    : Condition{std::string(kProgressing), true, std::string(kReasonRolloutInProgress),
                                "rolling out: " + stale});
    if (!o.not_owned.empty()) {
      std::string m = "refusing to adopt objects owned by someone else:";
      for (const std::string& n : o.not_owned) m += " " + n;
      conditions.push_back({std::string(kDegraded), true, std::string(kReasonResourceNotOwned), m});
    } else if (degraded != nullptr) {
      conditions.push_back(
          {std::string(kDegraded), true, degraded->degraded_reason, degraded->degraded_message});
    } else {
      conditions.push_back({std::string(kDegraded), false, std::string(kReasonAsExpected), "no faults"});
    }
  }
  if (o.plan.ok() && o.rollout.is_object()) conditions.push_back(QualityGateCondition(o.rollout));
  json status = {{"observedGeneration", generation},
                 {"prefill", parts[0].Summary()},
                 {"decode", parts[1].Summary()},
                 {"router", parts[2].Summary()},
                 {"conditions", MergeConditions(StoredConditions(mdep), conditions, generation, now)}};
  if (!o.precision.empty()) status["precision"] = o.precision;
  if (o.rollout.is_object()) status["rollout"] = o.rollout;
  return status;
}

}  // namespace tandem::controller::reconcile
