#include "controller/reconcile/pool_plan.h"

#include "controller/reconcile/engine_config.h"
#include "controller/reconcile/pod_template.h"

namespace tandem::controller::reconcile {
namespace {

json Metadata(const ModelPoolSpec& s, const json& pool) {
  json labels = CommonLabels(s.deployment_name, s.pool.role);
  labels[std::string(kPoolLabel)] = s.pool.role;
  return json{{"name", s.name},
              {"namespace", s.ns},
              {"labels", labels},
              {"ownerReferences", json::array({ControllerReference(pool)})}};
}

json Ports() {
  return json::array(
      {json{{"name", "http"}, {"port", kHttpPort}, {"targetPort", "http"}, {"protocol", "TCP"}},
       json{{"name", "grpc"}, {"port", kGrpcPort}, {"targetPort", "grpc"}, {"protocol", "TCP"}},
       json{{"name", "metrics"}, {"port", kMetricsPort}, {"targetPort", "metrics"}, {"protocol", "TCP"}}});
}

DesiredObject StatefulSet(const ModelPoolSpec& s, const json& pool) {
  AgentPod pod;
  pod.deployment = s.deployment_name;
  pod.role = s.pool.role;
  pod.common = &s.common;
  pod.resources = s.pool.resources;
  pod.node_selector = s.pool.node_selector;
  pod.gpus = s.pool.gpus;
  pod.termination_grace_seconds = s.pool.termination_grace_seconds;
  pod.config_hash = ContentHash(RenderPoolConfig(s.deployment_name, s.common, s.pool));
  pod.labels = Metadata(s, pool)["labels"];
  json spec = {
      {"replicas", s.pool.replicas},
      {"serviceName", s.name},
      // Replicas are independent engines: start and stop them in parallel, not one by one.
      {"podManagementPolicy", "Parallel"},
      {"selector", {{"matchLabels", PoolSelector(s.deployment_name, s.pool.role)}}},
      {"updateStrategy", {{"type", "RollingUpdate"}}},
      {"template", AgentPodTemplate(pod)},
  };
  return {json{{"apiVersion", "apps/v1"},
               {"kind", "StatefulSet"},
               {"metadata", Metadata(s, pool)},
               {"spec", spec}},
          {}};
}

DesiredObject HeadlessService(const ModelPoolSpec& s, const json& pool) {
  json spec = {{"clusterIP", "None"},
               // Peers find each other (KV transfers) before the readiness gate opens.
               {"publishNotReadyAddresses", true},
               {"selector", PoolSelector(s.deployment_name, s.pool.role)},
               {"ports", Ports()}};
  return {json{{"apiVersion", "v1"}, {"kind", "Service"}, {"metadata", Metadata(s, pool)}, {"spec", spec}},
          {}};
}

DesiredObject Budget(const ModelPoolSpec& s, const json& pool) {
  json spec = {{"maxUnavailable", 1},
               {"selector", {{"matchLabels", PoolSelector(s.deployment_name, s.pool.role)}}}};
  return {json{{"apiVersion", "policy/v1"},
               {"kind", "PodDisruptionBudget"},
               {"metadata", Metadata(s, pool)},
               {"spec", spec}},
          {}};
}

}  // namespace

json PoolSelector(std::string_view deployment, std::string_view role) {
  return json{{std::string(kDeploymentLabel), deployment}, {std::string(kPoolLabel), role}};
}

std::string PoolSelectorString(std::string_view deployment, std::string_view role) {
  return std::string(kDeploymentLabel) + "=" + std::string(deployment) + "," + std::string(kPoolLabel) + "=" +
         std::string(role);
}

StatusOr<PoolPlan> PlanPool(const json& pool, const PlanOptions& options) {
  StatusOr<ModelPoolSpec> spec = ParseModelPoolSpec(pool, options);
  if (!spec.ok()) return spec.status();
  PoolPlan plan{std::move(*spec), {}};
  plan.children.push_back(HeadlessService(plan.spec, pool));
  plan.children.push_back(StatefulSet(plan.spec, pool));
  plan.children.push_back(Budget(plan.spec, pool));
  return plan;
}

}  // namespace tandem::controller::reconcile
