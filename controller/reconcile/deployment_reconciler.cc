#include "controller/reconcile/conditions.h"
#include "controller/reconcile/deployment_plan.h"
#include "controller/reconcile/deployment_status.h"
#include "controller/reconcile/quality_gate.h"
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

bool ReadyReplicas(const StatusOr<json>& object) {
  return object.ok() && FieldReader(*object).Int("/status/readyReplicas", 0) >= 1;
}

}  // namespace

GateDecision ModelDeploymentReconciler::ObserveGate(const json& mdep, const DeploymentSpec& spec) {
  GateObservation o;
  o.wanted = PrecisionOf(spec);
  o.previous = FieldReader(mdep).Object("/status/rollout") != nullptr ? mdep["status"]["rollout"] : json();
  o.now = Rfc3339(ctx_.unix_seconds());
  StatusOr<json> prefill = ctx_.store->Get(Kind::kModelPool, spec.ns, PoolName(spec.name, "prefill"));
  StatusOr<json> decode = ctx_.store->Get(Kind::kModelPool, spec.ns, PoolName(spec.name, "decode"));
  if (prefill.ok() && decode.ok())
    o.serving = DeploymentPrecision{*PoolPrecisionOf(&*prefill), *PoolPrecisionOf(&*decode)};
  // The canary and the eval Pod only matter while a precision change is on trial (a lookup that
  // misses the cache is a live GET).
  const bool on_trial =
      spec.quality_gate.enabled && o.serving.has_value() &&
      (*o.serving != o.wanted || (o.previous.is_object() && o.previous.value("phase", "") == "Evaluating"));
  if (!on_trial) return DecideQualityGate(spec.quality_gate, o);
  StatusOr<json> eval = ctx_.store->Get(Kind::kPod, spec.ns, EvalPodName(spec.name, o.wanted));
  if (eval.ok()) o.eval_pod = &*eval;
  const std::string canary = CanaryName(spec.name);
  o.canary_ready = ReadyReplicas(ctx_.store->Get(Kind::kModelPool, spec.ns, PoolName(canary, "prefill"))) &&
                   ReadyReplicas(ctx_.store->Get(Kind::kModelPool, spec.ns, PoolName(canary, "decode"))) &&
                   ReadyReplicas(ctx_.store->Get(Kind::kDeployment, spec.ns, canary + "-router"));
  return DecideQualityGate(spec.quality_gate, o);
}

// The quality gate's canary stack and eval Pod, applied (or pruned) as `gate` wants them.
Status ModelDeploymentReconciler::ApplyGate(const json& mdep, const DeploymentSpec& spec,
                                            const GateDecision& gate) {
  const std::string uid = FieldReader(mdep).String("/metadata/uid", "");
  PruneScope canary_scope{spec.ns,
                          json{{std::string(kDeploymentLabel), CanaryName(spec.name)}},
                          {Kind::kModelPool, Kind::kConfigMap, Kind::kDeployment, Kind::kService}};
  std::vector<DesiredObject> canary;
  if (gate.canary) canary = CanaryChildren(spec, mdep);
  StatusOr<ApplyResult> applied = ApplyChildren(*ctx_.store, uid, canary, canary_scope);
  if (!applied.ok()) return applied.status().WithContext("the quality gate's canary");
  PruneScope eval_scope{
      spec.ns,
      json{{std::string(kDeploymentLabel), spec.name}, {std::string(kComponentLabel), "quality-gate"}},
      {Kind::kPod}};
  std::vector<DesiredObject> eval;
  if (gate.eval_pod) eval.push_back(EvalPod(spec, mdep));
  applied = ApplyChildren(*ctx_.store, uid, eval, eval_scope);
  if (!applied.ok()) return applied.status().WithContext("the quality gate's eval pod");
  return Status::Ok();
}

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
  std::optional<GateDecision> gate;
  std::optional<DeploymentSpec> wanted;  // the spec's own precision (the canary's)
  if (plan.ok()) {
    // The quality gate decides what precision the pools run while a new one is on trial.
    wanted = plan->spec;
    gate = ObserveGate(mdep, *wanted);
    if (gate->pools != PrecisionOf(plan->spec)) {
      plan->spec.prefill.weights = gate->pools.prefill.weights;
      plan->spec.prefill.kv_cache = gate->pools.prefill.kv_cache;
      plan->spec.decode.weights = gate->pools.decode.weights;
      plan->spec.decode.kv_cache = gate->pools.decode.kv_cache;
      plan->children = PlanChildren(plan->spec, mdep);
    }
    PruneScope scope{ns,
                     json{{std::string(kDeploymentLabel), name}},
                     {Kind::kModelPool, Kind::kConfigMap, Kind::kDeployment, Kind::kService}};
    StatusOr<ApplyResult> applied =
        ApplyChildren(*ctx_.store, FieldReader(mdep).String("/metadata/uid", ""), plan->children, scope);
    if (!applied.ok()) return applied.status();
    observed.not_owned = applied->not_owned;
    observed.precision = PrecisionSummary(plan->spec);
    RETURN_IF_ERROR(ApplyGate(mdep, *wanted, *gate));
    observed.rollout = gate->rollout;
    if (ctx_.events != nullptr && gate->event.has_value()) {
      ctx_.events->Record(mdep, gate->event->type, gate->event->reason, gate->event->message);
    }
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
