#include "controller/metrics/controller_metrics.h"
#include "controller/reconcile/autoscaler.h"
#include "controller/reconcile/conditions.h"
#include "controller/reconcile/pool_plan.h"
#include "controller/reconcile/pool_status.h"
#include "controller/reconcile/reconciler.h"

namespace tandem::controller::reconcile {

Status ModelPoolReconciler::Reconcile(const std::string& key) {
  std::string ns, name;
  SplitKey(key, &ns, &name);
  StatusOr<json> fetched = ctx_.store->Get(Kind::kModelPool, ns, name);
  if (!fetched.ok()) {
    if (fetched.status().code() != StatusCode::kNotFound) return fetched.status();
    if (ctx_.autoscale.memory != nullptr) ctx_.autoscale.memory->Forget(ns + "/" + name);
    return Status::Ok();
  }
  json pool = std::move(*fetched);
  FieldReader r(pool);
  if (r.String("/metadata/deletionTimestamp", "") != "") {
    if (ctx_.autoscale.memory != nullptr) ctx_.autoscale.memory->Forget(ns + "/" + name);
    return Status::Ok();  // children cascade
  }
  std::string deployment = r.String("/spec/deploymentName", "");
  std::string role = r.String("/spec/role", "");
  std::vector<json> pods;
  if (!deployment.empty() && !role.empty()) {
    StatusOr<std::vector<json>> listed = ctx_.store->List(Kind::kPod, ns, PoolSelector(deployment, role));
    if (listed.ok()) pods = std::move(*listed);
  }
  std::vector<const json*> pod_ptrs;
  for (const json& p : pods) pod_ptrs.push_back(&p);

  // The built-in autoscaler first, so a change it makes to spec.replicas is applied in this pass.
  json autoscaler_status = nullptr;
  if (StatusOr<ModelPoolSpec> spec = ParseModelPoolSpec(pool, ctx_.plan); spec.ok()) {
    StatusOr<AutoscaleOutcome> outcome = AutoscalePool(*ctx_.store, ctx_.autoscale, ctx_.events, ctx_.metrics,
                                                       pool, *spec, pod_ptrs, Rfc3339(ctx_.unix_seconds()));
    if (!outcome.ok()) return outcome.status();
    if (outcome->scaled) pool = std::move(outcome->pool);
    autoscaler_status = std::move(outcome->status);
  }

  StatusOr<PoolPlan> plan = PlanPool(pool, ctx_.plan);
  PoolObservation observed;
  observed.pool = &pool;
  observed.plan = plan.status();
  observed.desired = plan.ok() ? plan->spec.pool.replicas : 0;
  if (plan.ok()) {
    PruneScope scope{
        ns, PoolSelector(deployment, role), {Kind::kStatefulSet, Kind::kService, Kind::kPodDisruptionBudget}};
    StatusOr<ApplyResult> applied =
        ApplyChildren(*ctx_.store, r.String("/metadata/uid", ""), plan->children, scope);
    if (!applied.ok()) return applied.status();
    observed.not_owned = applied->not_owned;
    if (ctx_.events != nullptr && !applied->created_names.empty()) {
      std::string message = "created";
      for (const std::string& n : applied->created_names) message += " " + n;
      ctx_.events->Record(pool, kEventNormal, "Created", message);
    }
  }
  StatusOr<json> sts = ctx_.store->Get(Kind::kStatefulSet, ns, name);
  if (sts.ok() && !IsControlledBy(*sts, r.String("/metadata/uid", ""))) sts = Status::NotFound("not ours");
  observed.statefulset = sts.ok() ? &*sts : nullptr;
  observed.pods = pod_ptrs;

  json status = ComputePoolStatus(observed, Rfc3339(ctx_.unix_seconds()));
  if (!autoscaler_status.is_null()) status["autoscaler"] = std::move(autoscaler_status);
  if (ctx_.metrics != nullptr && !deployment.empty()) {
    ctx_.metrics->SetPoolReplicas(deployment, role, metrics::kReplicasDesired, observed.desired);
    ctx_.metrics->SetPoolReplicas(deployment, role, metrics::kReplicasCurrent,
                                  FieldReader(status).Int("/replicas", 0));
    ctx_.metrics->SetPoolReplicas(deployment, role, metrics::kReplicasReady,
                                  FieldReader(status).Int("/readyReplicas", 0));
  }
  json before = pool.value("status", json::object());
  StatusOr<bool> wrote = WriteStatusIfChanged(*ctx_.store, Kind::kModelPool, pool, status);
  if (!wrote.ok()) return wrote.status();
  if (*wrote && ctx_.events != nullptr) RecordTransitions(ctx_.events, pool, before, status);
  return Status::Ok();
}

}  // namespace tandem::controller::reconcile
