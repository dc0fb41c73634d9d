#pragma once
// The quality gate on precision rollouts (ModelDeployment.spec.rollout.qualityGate; docs/eval.md,
// "Quality gate"). When the weights or KV cache dtype of a pool changes, the deployment's pools
// keep serving at the precision they run, while a canary stack of the new configuration
// ("<name>-gate": a prefill and a decode ModelPool of one replica each, a router and its Service)
// comes up; then an eval Pod runs `tandem eval tools` over the gate's suite against the current
// router (baseline) and the canary's (candidate) and leaves its figures in its termination
// message. Promoted when the candidate's tool-call validity is at least minValidity and at most
// maxValidityDrop points below the baseline's: the pools take the new precision. Refused
// otherwise (or when the evaluation fails): the pools stay, status.rollout and the QualityGate
// condition say why, with the figures, until the spec's precision changes again.
//
// Pure: the reconciler observes, DecideQualityGate decides, the executor applies.

#include <optional>
#include <string>

#include "common/status.h"
#include "controller/reconcile/conditions.h"
#include "controller/reconcile/deployment_spec.h"
#include "controller/reconcile/objects.h"

namespace tandem::controller::reconcile {

struct PoolPrecision {
  std::string weights, kv_cache;
  bool operator==(const PoolPrecision&) const = default;
};

struct DeploymentPrecision {
  PoolPrecision prefill, decode;
  bool operator==(const DeploymentPrecision&) const = default;
  std::string Summary() const;  // "prefill=fp8/bf16 decode=int4/fp8_e4m3"
};

DeploymentPrecision PrecisionOf(const DeploymentSpec& spec);
// The precision a ModelPool object runs (spec.weights / spec.kvCache), or nullopt when absent.
std::optional<PoolPrecision> PoolPrecisionOf(const json* pool);

// What the eval Pod measured (its termination message, written by `tandem eval tools --summary`).
struct GateFigures {
  double baseline_validity = -1, candidate_validity = -1;  // -1: no call was made
  int64_t baseline_calls = 0, candidate_calls = 0, cases = 0;
};
// The figures of a finished eval Pod. Unavailable while it runs; FailedPrecondition when it failed
// (its exit code and message); InvalidArgument for a message that is not the summary.
StatusOr<GateFigures> GateResultOf(const json& eval_pod);

struct GateObservation {
  DeploymentPrecision wanted;                  // the spec's
  std::optional<DeploymentPrecision> serving;  // the pools' now; nullopt while either pool is missing
  json previous;                               // status.rollout as last written (null: none)
  const json* eval_pod = nullptr;              // the eval Pod of `wanted`, when it exists
  bool canary_ready = false;                   // both canary pools and the canary router ready
  std::string now;                             // RFC 3339
};

struct GateEvent {
  std::string type, reason, message;
};

struct GateDecision {
  DeploymentPrecision pools;  // what the deployment's own pools run after this reconcile
  bool canary = false;        // the canary stack wanted
  bool eval_pod = false;      // the eval Pod wanted (created when missing)
  json rollout;               // status.rollout (null: none)
  std::optional<GateEvent> event;
};

GateDecision DecideQualityGate(const QualityGateSpec& gate, const GateObservation& observation);

// "<deployment>-gate": the canary stack's deployment name (its pools, config and router).
std::string CanaryName(std::string_view deployment);
// "<deployment>-gate-eval-<8 hex of the target>".
std::string EvalPodName(std::string_view deployment, const DeploymentPrecision& target);

// The canary stack: `spec` at the wanted precision under CanaryName, one replica of each pool and
// of the router, no autoscaling; every object owned by `mdep`.
std::vector<DesiredObject> CanaryChildren(const DeploymentSpec& spec, const json& mdep);
// The eval Pod: `tandem eval tools` against the router (baseline) and the canary's (candidate),
// the suite read from the model volume, the summary written to the termination message.
DesiredObject EvalPod(const DeploymentSpec& spec, const json& mdep);

// The QualityGatePassed condition a rollout status (status.rollout, not null) implies: True once
// promoted; False while evaluating (reason Evaluating) and when refused (the refusal's reason).
Condition QualityGateCondition(const json& rollout);

}  // namespace tandem::controller::reconcile
