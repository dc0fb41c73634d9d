#pragma once
// ModelPool -> its children (pure, no I/O): a StatefulSet of tandem-agent pods ("--role prefill"
// or "--role decode"), the headless Service that gives each pod a stable DNS name for KV
// transfers, and a PodDisruptionBudget (maxUnavailable 1) so drains take one replica at a time.
// All three are named after the pool and owned by it.

#include <vector>

#include "common/status.h"
#include "controller/reconcile/deployment_spec.h"
#include "controller/reconcile/objects.h"

namespace tandem::controller::reconcile {

struct PoolPlan {
  ModelPoolSpec spec;
  std::vector<DesiredObject> children;  // StatefulSet, Service, PodDisruptionBudget
};

// REQUIRES: `pool` came from the API server (has metadata.uid). InvalidArgument for specs the CRD
// could not reject.
StatusOr<PoolPlan> PlanPool(const json& pool, const PlanOptions& options = {});

// The labels that select a pool's pods ("tandem.dev/deployment", "tandem.dev/pool").
json PoolSelector(std::string_view deployment, std::string_view role);

// The same as a label-selector string, for status.selector (the scale subresource).
std::string PoolSelectorString(std::string_view deployment, std::string_view role);

}  // namespace tandem::controller::reconcile
