#include "controller/reconcile/deployment_plan.h"

#include "controller/reconcile/engine_config.h"
#include "controller/reconcile/pod_template.h"

namespace tandem::controller::reconcile {
namespace {

json Metadata(const DeploymentSpec& s, const json& mdep, std::string name, std::string_view component) {
  return json{{"name", std::move(name)},
              {"namespace", s.ns},
              {"labels", CommonLabels(s.name, component)},
              {"ownerReferences", json::array({ControllerReference(mdep)})}};
}

// Fields a ModelPool shares with its ModelDeployment, copied as the user wrote them (the CRD
// defaults them the same way on both kinds).
json CommonPoolSpec(const json& spec) {
  json out = json::object();
  for (const char* key : {"model", "integrity", "tls", "image", "imagePullPolicy", "imagePullSecrets"}) {
    if (auto it = spec.find(key); it != spec.end() && !it->is_null()) out[key] = *it;
  }
  return out;
}

DesiredObject Pool(const DeploymentSpec& s, const json& mdep, const PoolSpec& p) {
  const json& spec = mdep.at("spec");
  json pool_spec = CommonPoolSpec(spec);
  pool_spec["image"] = s.common.image;  // resolved, so the pool does not need the controller default
  pool_spec["deploymentName"] = s.name;
  pool_spec["role"] = p.role;
  pool_spec["replicas"] = p.replicas;
  pool_spec["tensorParallel"] = p.tensor_parallel;
  pool_spec["weights"] = p.weights;
  pool_spec["kvCache"] = p.kv_cache;
  if (!p.kv_cache_memory.is_null()) pool_spec["kvCacheMemory"] = p.kv_cache_memory;
  if (!p.resources.empty()) pool_spec["resources"] = p.resources;
  if (!p.node_selector.empty()) pool_spec["nodeSelector"] = p.node_selector;
  if (!p.autoscaling.is_null()) pool_spec["autoscaling"] = p.autoscaling;
  pool_spec["terminationGracePeriodSeconds"] = p.termination_grace_seconds;

  json meta = Metadata(s, mdep, PoolName(s.name, p.role), p.role);
  meta["labels"][std::string(kPoolLabel)] = p.role;
  DesiredObject out{
      json{{"apiVersion", kTandemApiVersion}, {"kind", "ModelPool"}, {"metadata", meta}, {"spec", pool_spec}},
      {}};
  // Once the autoscaler owns a pool's size (scale subresource), the deployment only seeds it.
  if (p.autoscale.enabled) out.create_only.push_back("/spec/replicas");
  return out;
}

DesiredObject Config(const DeploymentSpec& s, const json& mdep) {
  json data = {{ConfigKey("prefill"), RenderPoolConfig(s.name, s.common, s.prefill)},
               {ConfigKey("decode"), RenderPoolConfig(s.name, s.common, s.decode)},
               {ConfigKey("router"),
                RenderRouterConfig(s.name, s.common, s.router_port, s.forward_unknown_tool_calls)}};
  json meta = Metadata(s, mdep, ConfigMapName(s.name), "config");
  meta["annotations"] = {{std::string(kConfigHashAnnotation), ContentHash(data.dump())}};
  return {json{{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", meta}, {"data", data}}, {}};
}

json RouterSelector(const DeploymentSpec& s) {
  return json{{std::string(kDeploymentLabel), s.name}, {std::string(kComponentLabel), "router"}};
}

DesiredObject RouterDeployment(const DeploymentSpec& s, const json& mdep) {
  json env = json::array();
  for (const char* role : {"prefill", "decode"}) {
    std::string var = std::string("TANDEM_") + (role[0] == 'p' ? "PREFILL" : "DECODE") + "_SERVICE";
    env.push_back({{"name", var}, {"value", PoolName(s.name, role) + "." + s.ns + ".svc"}});
  }
  if (!s.api_key_secret.empty()) {
    env.push_back({{"name", "TANDEM_API_KEYS"},
                   {"valueFrom", {{"secretKeyRef", {{"name", s.api_key_secret}, {"key", s.api_key_key}}}}}});
  }
  AgentPod pod;
  pod.deployment = s.name;
  pod.role = "router";
  pod.common = &s.common;
  pod.resources = s.router_resources;
  pod.http_port = s.router_port;
  pod.extra_env = env;
  pod.config_hash =
      ContentHash(RenderRouterConfig(s.name, s.common, s.router_port, s.forward_unknown_tool_calls));
  pod.labels = CommonLabels(s.name, "router");
  json spec = {
      {"replicas", s.router_replicas},
      {"selector", {{"matchLabels", RouterSelector(s)}}},
      {"strategy", {{"type", "RollingUpdate"}, {"rollingUpdate", {{"maxUnavailable", 0}, {"maxSurge", 1}}}}},
      {"template", AgentPodTemplate(pod)}};
  return {json{{"apiVersion", "apps/v1"},
               {"kind", "Deployment"},
               {"metadata", Metadata(s, mdep, s.name + "-router", "router")},
               {"spec", spec}},
          {}};
}

DesiredObject RouterService(const DeploymentSpec& s, const json& mdep) {
  json spec = {
      {"type", "ClusterIP"},
      {"selector", RouterSelector(s)},
      {"ports",
       json::array(
           {json{{"name", "http"}, {"port", s.router_port}, {"targetPort", "http"}, {"protocol", "TCP"}}})}};
  return {json{{"apiVersion", "v1"},
               {"kind", "Service"},
               {"metadata", Metadata(s, mdep, s.name, "router")},
               {"spec", spec}},
          {}};
}

}  // namespace

std::string PoolName(std::string_view deployment, std::string_view role) {
  return std::string(deployment) + "-" + std::string(role);
}

std::string PrecisionSummary(const DeploymentSpec& s) {
  return "prefill=" + s.prefill.weights + "/" + s.prefill.kv_cache + " decode=" + s.decode.weights + "/" +
         s.decode.kv_cache;
}

StatusOr<DeploymentPlan> PlanDeployment(const json& mdep, const PlanOptions& options) {
  StatusOr<DeploymentSpec> spec = ParseDeploymentSpec(mdep, options);
  if (!spec.ok()) return spec.status();
  DeploymentPlan plan{std::move(*spec), {}};
  plan.children = PlanChildren(plan.spec, mdep);
  return plan;
}

std::vector<DesiredObject> PlanChildren(const DeploymentSpec& s, const json& mdep) {
  return {Config(s, mdep), Pool(s, mdep, s.prefill), Pool(s, mdep, s.decode), RouterDeployment(s, mdep),
          RouterService(s, mdep)};
}

}  // namespace tandem::controller::reconcile
