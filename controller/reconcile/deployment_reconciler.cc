#include "controller/reconcile/conditions.h"
#include "controller/reconcile/deployment_plan.h"
#include "controller/reconcile/deployment_status.h"
#include "controller/reconcile/reconciler.h"

namespace tandem::controller::reconcile {
namespace {

bool HasFinalizer(const json& object) {
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->contains("finalizers") || !meta->at("finalizers").is_array())
    return false;
  for (const json& f : meta->at("finalizers")) {
    if (f == kFinalizer) return true;
  }
  return false;
}

const json* Ptr(const StatusOr<json>& object) { return object.ok() ? &*object : nullptr; }

}  // namespace

void SplitKey(const std::string& key, std::string* ns, std::string* name) {
  size_t slash = key.find('/');
  *ns = slash == std::string::npos ? "default" : key.substr(0, slash);
  *name = slash == std::string::npos ? key : key.substr(slash + 1);
}

StatusOr<bool> WriteStatusIfChanged(ObjectStore& store, Kind kind, const json& object, const json& status) {
  auto old = object.find("status");
  if (old != object.end() && *old == status) return false;
  json updated = object;
  updated["status"] = status;
  StatusOr<json> written = store.UpdateStatus(kind, updated);
  if (!written.ok()) return written.status().WithContext("writing status of " + ObjectKey(object));
  return true;
}

Status ModelDeploymentReconciler::Finalize(const json& mdep) {
  if (!HasFinalizer(mdep)) return Status::Ok();
  // Cleanup of what owner references do not cover would go here; every child today is namespaced
  // and owned, so the garbage collector removes them once the finalizer is gone.
  json updated = mdep;
  json kept = json::array();
  for (const json& f : mdep["metadata"]["finalizers"]) {
    if (f != kFinalizer) kept.push_back(f);
  }
  updated["metadata"]["finalizers"] = kept;
  StatusOr<json> written = ctx_.store->Update(Kind::kModelDeployment, updated);
  if (!written.ok() && written.status().code() != StatusCode::kNotFound) {
    return written.status().WithContext("removing the finalizer of " + ObjectKey(mdep));
  }
  return Status::Ok();
}

Status ModelDeploymentReconciler::Reconcile(const std::string& key) {
  std::string ns, name;
  SplitKey(key, &ns, &name);
  StatusOr<json> fetched = ctx_.store->Get(Kind::kModelDeployment, ns, name);
  if (!fetched.ok())
    return fetched.status().code() == StatusCode::kNotFound ? Status::Ok() : fetched.status();
  json mdep = std::move(*fetched);
  if (FieldReader(mdep).String("/metadata/deletionTimestamp", "") != "") return Finalize(mdep);
  if (!HasFinalizer(mdep)) {
    json updated = mdep;
    updated["metadata"]["finalizers"].push_back(kFinalizer);
    StatusOr<json> written = ctx_.store->Update(Kind::kModelDeployment, updated);
    if (!written.ok()) return written.status().WithContext("adding the finalizer to " + key);
    mdep = std::move(*written);
  }

  StatusOr<DeploymentPlan> plan = PlanDeployment(mdep, ctx_.plan);
  DeploymentObservation observed;
  observed.deployment = &mdep;
  observed.plan = plan.status();
  if (plan.ok()) {
    PruneScope scope{ns,
                     json{{std::string(kDeploymentLabel), name}},
                     {Kind::kModelPool, Kind::kConfigMap, Kind::kDeployment, Kind::kService}};
    StatusOr<ApplyResult> applied =
        ApplyChildren(*ctx_.store, FieldReader(mdep).String("/metadata/uid", ""), plan->children, scope);
    if (!applied.ok()) return applied.status();
    observed.not_owned = applied->not_owned;
    observed.precision = PrecisionSummary(plan->spec);
    if (ctx_.events != nullptr && !applied->created_names.empty()) {
      std::string message = "created";
      for (const std::string& n : applied->created_names) message += " " + n;
      ctx_.events->Record(mdep, kEventNormal, "Created", message);
    }
  }
  StatusOr<json> prefill = ctx_.store->Get(Kind::kModelPool, ns, PoolName(name, "prefill"));
  StatusOr<json> decode = ctx_.store->Get(Kind::kModelPool, ns, PoolName(name, "decode"));
  StatusOr<json> router = ctx_.store->Get(Kind::kDeployment, ns, name + "-router");
  observed.prefill = Ptr(prefill);
  observed.decode = Ptr(decode);
  observed.router = Ptr(router);
  // The deployment's spec sizes its pools, except where the autoscaler owns a pool's replicas.
  auto desired = [&](const json* pool, const PoolSpec* spec) -> int64_t {
    if (spec == nullptr) return DesiredReplicas(pool, 0);
    return spec->autoscale.enabled ? DesiredReplicas(pool, spec->replicas) : spec->replicas;
  };
  observed.prefill_desired = desired(observed.prefill, plan.ok() ? &plan->spec.prefill : nullptr);
  observed.decode_desired = desired(observed.decode, plan.ok() ? &plan->spec.decode : nullptr);
  observed.router_desired = plan.ok() ? plan->spec.router_replicas : 0;

  json status = ComputeDeploymentStatus(observed, Rfc3339(ctx_.unix_seconds()));
  json before = mdep.value("status", json::object());
  StatusOr<bool> wrote = WriteStatusIfChanged(*ctx_.store, Kind::kModelDeployment, mdep, status);
  if (!wrote.ok()) return wrote.status();
  if (*wrote && ctx_.events != nullptr) RecordTransitions(ctx_.events, mdep, before, status);
  return Status::Ok();
}

}  // namespace tandem::controller::reconcile
