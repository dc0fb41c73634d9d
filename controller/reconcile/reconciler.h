#pragma once
// The two reconcilers. Each Reconcile(key) is short: fetch the object (from the informer cache),
// plan (pure), apply the children (executor), compute the status (pure) and write it once, only
// when it changed. An error return means "requeue with backoff" (conflicts come back as Aborted);
// OK means done until the next event.
//
// ModelDeploymentReconciler also keeps the tandem.dev/cleanup finalizer: added on first sight;
// on deletion it runs the cleanup of anything not garbage-collected through owner references
// (today nothing: every child is namespaced and owned) and then removes the finalizer so the API
// server deletes the object and its children cascade.

#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"
#include "controller/reconcile/apply.h"
#include "controller/reconcile/autoscaler.h"
#include "controller/reconcile/deployment_spec.h"
#include "controller/reconcile/events.h"
#include "controller/reconcile/quality_gate.h"

namespace tandem::controller::metrics {
class ControllerMetrics;
}

namespace tandem::controller::reconcile {

struct ReconcileContext {
  ObjectStore* store = nullptr;                   // REQUIRES: not null
  EventRecorder* events = nullptr;                // may be null
  metrics::ControllerMetrics* metrics = nullptr;  // may be null
  std::function<int64_t()> unix_seconds;          // wall clock for lastTransitionTime
  PlanOptions plan;
  AutoscaleContext autoscale;  // the built-in autoscaler's signals and memory (off when unset)
};

class ModelDeploymentReconciler {
 public:
  explicit ModelDeploymentReconciler(ReconcileContext context) : ctx_(std::move(context)) {}
  // `key` is "namespace/name".
  Status Reconcile(const std::string& key);

 private:
  Status Finalize(const json& mdep);
  // The quality gate: observed and decided (quality_gate.h), then its canary and eval Pod applied.
  GateDecision ObserveGate(const json& mdep, const DeploymentSpec& spec);
  Status ApplyGate(const json& mdep, const DeploymentSpec& spec, const GateDecision& gate);
  ReconcileContext ctx_;
};

class ModelPoolReconciler {
 public:
  explicit ModelPoolReconciler(ReconcileContext context) : ctx_(std::move(context)) {}
  Status Reconcile(const std::string& key);

 private:
  ReconcileContext ctx_;
};

// Splits "namespace/name"; a key without '/' is a name in "default".
void SplitKey(const std::string& key, std::string* ns, std::string* name);

// Writes `status` to `object` through the status subresource unless it equals the stored one.
// Returns whether it wrote.
StatusOr<bool> WriteStatusIfChanged(ObjectStore& store, Kind kind, const json& object, const json& status);

}  // namespace tandem::controller::reconcile
