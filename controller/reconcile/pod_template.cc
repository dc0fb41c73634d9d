#include "controller/reconcile/pod_template.h"

#include "controller/reconcile/engine_config.h"

namespace tandem::controller::reconcile {
namespace {

json Probe(std::string_view path, int64_t period_s, int64_t failure_threshold) {
  return json{{"httpGet", {{"path", path}, {"port", "metrics"}}},
              {"periodSeconds", period_s},
              {"failureThreshold", failure_threshold}};
}

// Quantities as strings, the form the API server returns them in (so a re-read compares equal).
json Resources(const AgentPod& pod) {
  json out = json::object();
  for (const char* section : {"requests", "limits"}) {
    auto it = pod.resources.find(section);
    if (it == pod.resources.end() || !it->is_object() || it->empty()) continue;
    for (auto q = it->begin(); q != it->end(); ++q) {
      out[section][q.key()] = q->is_number_integer() ? json(std::to_string(q->get<int64_t>())) : q.value();
    }
  }
  if (pod.gpus > 0) {
    // Extended resources must have requests == limits.
    out["requests"]["nvidia.com/gpu"] = std::to_string(pod.gpus);
    out["limits"]["nvidia.com/gpu"] = std::to_string(pod.gpus);
  }
  return out;
}

json FieldEnv(std::string_view name, std::string_view field_path) {
  return json{{"name", name}, {"valueFrom", {{"fieldRef", {{"fieldPath", field_path}}}}}};
}

}  // namespace

json AgentPodTemplate(const AgentPod& pod) {
  const CommonSpec& common = *pod.common;
  json env =
      json::array({FieldEnv("POD_NAME", "metadata.name"), FieldEnv("POD_NAMESPACE", "metadata.namespace"),
                   json{{"name", "TANDEM_DEPLOYMENT"}, {"value", pod.deployment}},
                   json{{"name", "TANDEM_POOL"}, {"value", pod.role}}});
  for (const json& e : pod.extra_env) env.push_back(e);

  json mounts = json::array({json{{"name", "config"}, {"mountPath", kConfigMountPath}, {"readOnly", true}},
                             json{{"name", "tmp"}, {"mountPath", "/tmp"}}});
  json volumes = json::array(
      {json{{"name", "config"},
            {"configMap",
             {{"name", ConfigMapName(pod.deployment)},
              {"items", json::array({json{{"key", ConfigKey(pod.role)}, {"path", ConfigKey(pod.role)}}})}}}},
       json{{"name", "tmp"}, {"emptyDir", json::object()}}});
  if (!common.model_volume.is_null()) {
    json volume = {{"name", "model"}};
    if (!common.claim_name.empty()) {
      volume["persistentVolumeClaim"] = {{"claimName", common.claim_name},
                                         {"readOnly", common.claim_read_only}};
    } else {
      volume["hostPath"] = {{"path", common.host_path}, {"type", "Directory"}};
    }
    volumes.push_back(volume);
    mounts.push_back({{"name", "model"}, {"mountPath", common.mount_path}, {"readOnly", true}});
  }
  if (!common.tls_secret.empty()) {
    // The kubelet swaps the files when the Secret rotates; the agent re-reads them.
    volumes.push_back({{"name", "tls"}, {"secret", {{"secretName", common.tls_secret}}}});
    mounts.push_back({{"name", "tls"}, {"mountPath", kTlsMountPath}, {"readOnly", true}});
  }
  if (pod.gpus > 1) {
    // NCCL between the tensor-parallel ranks needs more shared memory than the 64Mi default.
    volumes.push_back({{"name", "dshm"}, {"emptyDir", {{"medium", "Memory"}}}});
    mounts.push_back({{"name", "dshm"}, {"mountPath", "/dev/shm"}});
  }

  json container = {
      {"name", "agent"},
      {"image", common.image},
      {"command", json::array({"tandem-agent"})},
      {"args", json::array({"--config", std::string(kConfigMountPath) + "/" + ConfigKey(pod.role), "--role",
                            pod.role})},
      {"ports",
       json::array({json{{"name", "http"}, {"containerPort", pod.http_port}, {"protocol", "TCP"}},
                    json{{"name", "grpc"}, {"containerPort", kGrpcPort}, {"protocol", "TCP"}},
                    json{{"name", "metrics"}, {"containerPort", kMetricsPort}, {"protocol", "TCP"}}})},
      {"env", env},
      {"resources", Resources(pod)},
      {"livenessProbe", Probe("/healthz", 10, 3)},
      {"readinessProbe", Probe("/readyz", 5, 3)},
      // Loading a large checkpoint takes minutes: liveness waits until the first start succeeds.
      {"startupProbe", Probe("/healthz", 10, 180)},
      // Before SIGTERM: drain (no new work, readiness false, in-flight requests finish or, with no
      // token sent yet, go back to the router). StatefulSet scale-down removes the highest
      // ordinals, and it is their own hook that drains them.
      {"lifecycle", {{"preStop", {{"httpGet", {{"path", "/drain"}, {"port", "metrics"}}}}}}},
      {"volumeMounts", mounts},
      {"securityContext",
       {{"allowPrivilegeEscalation", false},
        {"capabilities", {{"drop", json::array({"ALL"})}}},
        {"readOnlyRootFilesystem", true},
        {"runAsNonRoot", true},
        {"runAsUser", kAgentUid}}},
  };
  if (!common.image_pull_policy.empty()) container["imagePullPolicy"] = common.image_pull_policy;

  json spec = {
      {"automountServiceAccountToken", false},
      {"enableServiceLinks", false},
      {"securityContext",
       {{"runAsNonRoot", true},
        {"runAsUser", kAgentUid},
        {"runAsGroup", kAgentUid},
        {"fsGroup", kAgentUid},
        {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
      {"containers", json::array({container})},
      {"volumes", volumes},
      {"terminationGracePeriodSeconds", pod.termination_grace_seconds},
  };
  if (!pod.node_selector.empty()) spec["nodeSelector"] = pod.node_selector;
  if (!common.image_pull_secrets.empty()) spec["imagePullSecrets"] = common.image_pull_secrets;
  if (pod.gpus > 0) {
    spec["tolerations"] =
        json::array({json{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}});
  }
  return json{
      {"metadata",
       {{"labels", pod.labels}, {"annotations", {{std::string(kConfigHashAnnotation), pod.config_hash}}}}},
      {"spec", spec}};
}

}  // namespace tandem::controller::reconcile
