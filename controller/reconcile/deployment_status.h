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
};

// The status to store. `now` (RFC 3339) stamps conditions whose status flips.
json ComputeDeploymentStatus(const DeploymentObservation& observed, std::string_view now);

}  // namespace tandem::controller::reconcile
