#pragma once
// A ModelDeployment's status from its pools and router (pure): per-pool replicas/readyReplicas
// and the "ready/desired" printer strings, the precision summary, and the conditions
//   Ready       True AllPoolsReady | False PodsNotReady, InsufficientCapacity, InvalidSpec
//   Progressing True RolloutInProgress | False RolloutComplete, InvalidSpec
//   Degraded    True InsufficientCapacity, InvalidSpec, ResourceNotOwned (or a pool's reason)
//               | False AsExpected
// A pool counts as ready only when its status is for its current generation and says Ready.

#include <string>
#include <vector>

#include "common/status.h"
#include "controller/reconcile/objects.h"

namespace tandem::controller::reconcile {

struct DeploymentObservation {
  const json* deployment = nullptr;    // the ModelDeployment; REQUIRES: not null
  Status plan = Status::Ok();          // PlanDeployment's result: an error is InvalidSpec
  std::string precision;               // PrecisionSummary() when the plan succeeded
  std::vector<std::string> not_owned;  // children the executor refused to adopt
  const json* prefill = nullptr;       // the live ModelPools, or null
  const json* decode = nullptr;
  const json* router = nullptr;  // the live router Deployment, or null
  // Desired replicas as the typed specs say: the deployment's, or an autoscaled pool's own
  // (DesiredReplicas); 0 where neither could be read. A pool is ready with at least that many.
  int64_t prefill_desired = 0;
  int64_t decode_desired = 0;
  int64_t router_desired = 0;
  json rollout;  // the quality gate's status.rollout (quality_gate.h), or null
};

// A pool's desired replicas: the live ModelPool's spec.replicas as PlanPool reads it, or
// `from_deployment` while the pool is missing or unreadable.
int64_t DesiredReplicas(const json* pool, int64_t from_deployment);

// The status to store. `now` (RFC 3339) stamps conditions whose status flips.
json ComputeDeploymentStatus(const DeploymentObservation& observed, std::string_view now);

}  // namespace tandem::controller::reconcile
