#pragma once
// A ModelPool's status from what the cluster shows (pure): replicas and readyReplicas from its
// StatefulSet, the label selector for the scale subresource, and the conditions
//   Ready       True AllReplicasReady | False PodsNotReady, InsufficientCapacity, InvalidSpec
//   Progressing True RolloutInProgress | False RolloutComplete, InvalidSpec
//   Degraded    True InsufficientCapacity, InvalidSpec, ResourceNotOwned | False AsExpected
// InsufficientCapacity means some pod is unschedulable (PodScheduled=False, Unschedulable).

#include <string>
#include <vector>

#include "common/status.h"
#include "controller/reconcile/objects.h"

namespace tandem::controller::reconcile {

struct PoolObservation {
  const json* pool = nullptr;          // REQUIRES: not null
  Status plan = Status::Ok();          // PlanPool's result: an error is InvalidSpec
  int64_t desired = 0;                 // spec.replicas as PlanPool read it; 0 when the plan failed
  std::vector<std::string> not_owned;  // children the executor refused to adopt ("StatefulSet x")
  const json* statefulset = nullptr;   // the live StatefulSet, or null
  std::vector<const json*> pods;       // the pool's pods (selected by its labels)
};

// The scheduler's message of an unschedulable pod (PodScheduled False, reason Unschedulable), or
// "" when it is scheduled or not yet tried.
std::string PodUnschedulableMessage(const json& pod);

// Whether the pod's Ready condition is True.
bool PodReady(const json& pod);

// The status to store. `now` (RFC 3339) stamps conditions whose status flips.
json ComputePoolStatus(const PoolObservation& observed, std::string_view now);

}  // namespace tandem::controller::reconcile
