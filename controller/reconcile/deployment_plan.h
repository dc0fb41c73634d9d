#pragma once
// ModelDeployment -> its children (pure, no I/O):
//   ModelPool "<name>-prefill" and "<name>-decode" (owned, controller=true),
//   ConfigMap "<name>-config" with each pool's agent config,
//   Deployment "<name>-router" and Service "<name>" for the OpenAI API.
// Secrets (API keys, image pull secrets) are referenced by name, never copied.

#include <vector>

#include "common/status.h"
#include "controller/reconcile/deployment_spec.h"
#include "controller/reconcile/objects.h"

namespace tandem::controller::reconcile {

struct DeploymentPlan {
  DeploymentSpec spec;
  // In creation order: the ConfigMap first so the pods that mount it start cleanly.
  std::vector<DesiredObject> children;
};

// REQUIRES: `mdep` came from the API server (has metadata.uid). InvalidArgument for specs the CRD
// could not reject (the reconciler reports it as the InvalidSpec condition and touches nothing).
StatusOr<DeploymentPlan> PlanDeployment(const json& mdep, const PlanOptions& options = {});

// The children of a parsed spec (PlanDeployment's, for a spec the caller adjusted: the quality
// gate's pool precision, or its canary stack under another name). Owned by `mdep`.
std::vector<DesiredObject> PlanChildren(const DeploymentSpec& spec, const json& mdep);

// "<deployment>-<role>".
std::string PoolName(std::string_view deployment, std::string_view role);

// "prefill=fp8/bf16 decode=int4/fp8_e4m3": the status.precision printer column.
std::string PrecisionSummary(const DeploymentSpec& spec);

}  // namespace tandem::controller::reconcile
