#pragma once
// ModelDeployment and ModelPool specs (crds/) read into plain structs, with the checks the CRD
// schema cannot make (names that would not fit the children, GPU requests that disagree with
// tensorParallel, port clashes, quantities). Pure: no I/O.

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"
#include "controller/reconcile/autoscale_policy.h"
#include "controller/reconcile/objects.h"

namespace tandem::controller::reconcile {

// What both kinds carry: the model, integrity settings and the agent image.
struct CommonSpec {
  std::string model_name;  // served model name (the OpenAI `model` field)
  std::string model_path;  // checkpoint directory inside the pod; "" with a dummy model
  json model_volume;       // the CRD's volume block ({persistentVolumeClaim|hostPath, mountPath}) or null
  // model_volume read and checked (when it is not null): a claim or a node directory, mounted
  // read-only at mount_path; the claim itself is attached read-only unless claim_read_only is false.
  std::string claim_name;
  bool claim_read_only = true;
  std::string host_path;
  std::string mount_path = "/models";
  std::string dummy_preset;  // set instead of model_path for random weights
  int64_t dummy_seed = 0;
  bool page_tags = true;
  bool transfer_checksum = true;
  std::string image;                        // resolved: the spec's, else PlanOptions::default_image
  std::string image_pull_policy;            // "" : the cluster default
  json image_pull_secrets = json::array();  // [{name}], referenced, never copied
  // spec.tls: mutual TLS between the agents from a kubernetes.io/tls Secret (tls.crt, tls.key,
  // ca.crt) mounted in every agent pod; "" : plaintext. The certificates carry tls_server_name.
  std::string tls_secret;
  std::string tls_server_name = "tandem-agent";
};

struct PoolSpec {
  std::string role;  // "prefill" | "decode"
  int64_t replicas = 1;
  int64_t tensor_parallel = 1;
  std::string weights = "bf16";     // bf16 | fp8 | int4
  std::string kv_cache = "bf16";    // bf16 | fp8_e4m3
  json kv_cache_memory;             // the Quantity as given, or null
  int64_t kv_cache_bytes = 0;       // kv_cache_memory in bytes; 0 when unset
  json resources = json::object();  // {requests, limits} as given
  json node_selector = json::object();
  json autoscaling;           // as given; null when absent
  AutoscalePolicy autoscale;  // autoscaling read and checked (defaults, disabled, when absent); enabled:
                              // an autoscaler (either mode) owns the replicas
  int64_t gpus = 0;  // nvidia.com/gpu per pod: tensorParallel when the resources mention GPUs, else 0
  // The pods' terminationGracePeriodSeconds: the preStop drain (GET /drain) and the agent's
  // shutdown fit in it (docs/autoscaling.md, "Drain").
  int64_t termination_grace_seconds = kDefaultTerminationGraceSeconds;
};

// spec.rollout.qualityGate (quality_gate.h): a pool's new precision is evaluated on a canary and
// promoted only when its tool-call validity passes.
struct QualityGateSpec {
  bool enabled = false;
  std::string suite;               // a suite file (JSONL) inside the model volume
  double min_validity = 0.95;      // 0..1
  double max_validity_drop = 0.5;  // points below the current configuration's validity
  int64_t cases = 0;               // the suite's first N cases (0: all)
  int64_t max_tokens = 256;        // per answer
};

struct DeploymentSpec {
  std::string name;
  std::string ns;
  CommonSpec common;
  int64_t router_replicas = 1;
  int64_t router_port = kHttpPort;
  json router_resources = json::object();
  std::string api_key_secret;  // Secret name; "" when the router runs without API keys
  std::string api_key_key = "api-key";
  // spec.router.unknownToolCalls: false ("drop", the default) takes tool calls naming a function the
  // request did not offer out of the response; true ("forward") passes them on.
  bool forward_unknown_tool_calls = false;
  PoolSpec prefill;
  PoolSpec decode;
  // GPUs both pools may hold together (replicas x GPUs per pod, summed), a cap on the built-in
  // autoscaler's scale-ups; unset: no cap.
  std::optional<int64_t> gpu_budget;
  QualityGateSpec quality_gate;
};

// A ModelPool read back (the deployment planner writes these; users may too).
struct ModelPoolSpec {
  std::string name;
  std::string ns;
  std::string deployment_name;
  CommonSpec common;
  PoolSpec pool;
};

struct PlanOptions {
  std::string default_image = std::string(kDefaultImage);  // tandem-controller --agent-image
};

// Reads and checks a ModelDeployment. InvalidArgument names the field at fault:
// "spec.decode.resources: asks for 4 GPUs per pod but tensorParallel is 8".
StatusOr<DeploymentSpec> ParseDeploymentSpec(const json& mdep, const PlanOptions& options = {});

// Reads and checks a ModelPool.
StatusOr<ModelPoolSpec> ParseModelPoolSpec(const json& pool, const PlanOptions& options = {});

// A resource.Quantity ("40Gi", "512M", "1.5Gi", 1024) in bytes. InvalidArgument when malformed,
// negative or beyond int64.
StatusOr<int64_t> ParseQuantityBytes(const json& quantity);

}  // namespace tandem::controller::reconcile
