#pragma once
// Vocabulary shared by the planners, the executor and the reconcilers: the kinds the controller
// touches, the labels and owner references it stamps on children, and a reader that pulls typed
// fields out of an untrusted object without throwing.
//
// Everything here is pure (no I/O).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace tandem::controller::reconcile {

using json = nlohmann::json;

inline constexpr std::string_view kTandemApiVersion = "tandem.dev/v1alpha1";
inline constexpr std::string_view kManagedBy = "tandem-controller";
inline constexpr std::string_view kFinalizer = "tandem.dev/cleanup";
inline constexpr std::string_view kDeploymentLabel = "tandem.dev/deployment";
inline constexpr std::string_view kPoolLabel = "tandem.dev/pool";
inline constexpr std::string_view kComponentLabel = "app.kubernetes.io/component";
// Hash of the engine config a pod runs with; a change rolls the pods.
inline constexpr std::string_view kConfigHashAnnotation = "tandem.dev/config-hash";

// Ports every agent listens on (docs/agent-config.md defaults).
inline constexpr int kHttpPort = 8000;
inline constexpr int kGrpcPort = 50051;
inline constexpr int kMetricsPort = 9400;
inline constexpr std::string_view kConfigMountPath = "/etc/tandem";
// Where spec.tls's Secret is mounted in agent pods (tls.crt, tls.key, ca.crt).
inline constexpr std::string_view kTlsMountPath = "/etc/tandem-tls";
// Pod termination: the preStop hook drains the agent (GET /drain on the metrics port) for the
// grace period less kDrainMarginSeconds, which is left for its servers to stop after SIGTERM.
inline constexpr int64_t kDefaultTerminationGraceSeconds = 60;
inline constexpr int64_t kDrainMarginSeconds = 5;
inline constexpr std::string_view kDefaultImage = "ghcr.io/tandem-dev/tandem-agent:latest";

// The kinds the controller creates, reads or watches.
enum class Kind {
  kModelDeployment,
  kModelPool,
  kStatefulSet,
  kService,
  kConfigMap,
  kDeployment,
  kPodDisruptionBudget,
  kPod,
  kEvent,
};

struct KindInfo {
  std::string_view group;     // "" for the core group
  std::string_view version;   // "v1"
  std::string_view resource;  // plural, lower case
  std::string_view kind;      // "StatefulSet"
  bool namespaced = true;
  std::string ApiVersion() const;
};

const KindInfo& InfoOf(Kind kind);

// The Kind of an object from its apiVersion and kind. NotFound for kinds the controller does not use.
StatusOr<Kind> KindOfObject(const json& object);

// app.kubernetes.io/{name,instance,component,managed-by} and tandem.dev/deployment.
json CommonLabels(std::string_view deployment, std::string_view component);

// An ownerReference to `owner` with controller and blockOwnerDeletion set.
// REQUIRES: owner has apiVersion, kind, metadata.name and metadata.uid (checked by the planners).
json ControllerReference(const json& owner);

// True when `object` has a controller ownerReference with this uid.
bool IsControlledBy(const json& object, std::string_view owner_uid);

// The uid of `object`'s controller ownerReference, or "" when it has none.
std::string ControllerUid(const json& object);

// FNV-1a 64 of `text` as 16 lower-case hex digits (stable across runs and platforms).
std::string ContentHash(std::string_view text);

// "namespace/name" of an object (the work-queue key), or "name" for cluster-scoped ones.
std::string ObjectKey(const json& object);

// Reads typed fields at JSON pointers ("/spec/prefill/replicas") from an object that came from
// outside. A missing field yields the default; a field of the wrong type records an
// InvalidArgument naming the field ("spec.prefill.replicas: want an integer") and yields the
// default. The first error is kept.
class FieldReader {
 public:
  explicit FieldReader(const json& root) : root_(root) {}

  std::string String(std::string_view pointer, std::string fallback);
  int64_t Int(std::string_view pointer, int64_t fallback);
  // An integer or a floating-point number.
  double Number(std::string_view pointer, double fallback);
  bool Bool(std::string_view pointer, bool fallback);
  // The object at `pointer`, or nullptr when absent (or null, or not an object: an error).
  const json* Object(std::string_view pointer);
  // Records an error of the caller's own (cross-field rules).
  void Fail(std::string message);

  const Status& status() const { return status_; }

 private:
  const json* Find(std::string_view pointer) const;
  void WrongType(std::string_view pointer, std::string_view want);

  const json& root_;
  Status status_;
};

// One object a planner wants to exist, and how the executor treats it.
struct DesiredObject {
  json object;
  // JSON pointers ("/spec/replicas") set when the object is created and left to others afterwards
  // (e.g. the replicas of an autoscaled pool, owned by the autoscaler once the pool exists).
  std::vector<std::string> create_only;
};

// "/spec/prefill/replicas" -> "spec.prefill.replicas".
std::string FieldPath(std::string_view pointer);

}  // namespace tandem::controller::reconcile
