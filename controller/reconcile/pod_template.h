#pragma once
// The pod template every tandem-agent pod uses (router, prefill and decode alike): the agent
// container with its arguments, ports, probes and resources, the config and model volumes, and
// the restricted Pod Security Standard (non-root, no privilege escalation, all capabilities
// dropped, seccomp RuntimeDefault, read-only root filesystem with a writable /tmp), and the
// drain on the way out: a preStop GET /drain on the metrics port that answers once the agent is
// idle (it turns not-ready and refuses new work at once), within terminationGracePeriodSeconds.
// Pure.

#include <cstdint>
#include <string>

#include "controller/reconcile/deployment_spec.h"

namespace tandem::controller::reconcile {

struct AgentPod {
  std::string deployment;
  std::string role;                    // router | prefill | decode: `tandem-agent --role`, and the config key
  const CommonSpec* common = nullptr;  // REQUIRES: not null
  json resources = json::object();     // {requests, limits} as the user gave them
  json node_selector = json::object();
  int64_t gpus = 0;  // nvidia.com/gpu requested and limited to this when > 0
  int64_t http_port = kHttpPort;
  json extra_env = json::array();  // appended to the standard env
  std::string config_hash;         // ContentHash of the rendered config: a change rolls the pods
  json labels;                     // pod labels (must match the owner's selector)
  int64_t termination_grace_seconds = kDefaultTerminationGraceSeconds;
};

// spec.template of a StatefulSet or Deployment.
json AgentPodTemplate(const AgentPod& pod);

// The UID the agent image runs as (distroless nonroot).
inline constexpr int64_t kAgentUid = 65532;

}  // namespace tandem::controller::reconcile
