#include "controller/reconcile/quality_gate.h"

#include <cstdio>
#include <tuple>

#include "controller/reconcile/deployment_plan.h"

namespace tandem::controller::reconcile {
namespace {

constexpr std::string_view kPhaseEvaluating = "Evaluating";
constexpr std::string_view kPhasePromoted = "Promoted";
constexpr std::string_view kPhaseRefused = "Refused";

std::string Fixed(double v, int decimals) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.*f", decimals, v);
  return b;
}

std::string Percent(double ratio) { return ratio < 0 ? "none (no calls)" : Fixed(100 * ratio, 1) + "%"; }

json FiguresJson(const GateFigures& f) {
  return json{{"baselineValidity", f.baseline_validity},
              {"candidateValidity", f.candidate_validity},
              {"baselineCalls", f.baseline_calls},
              {"candidateCalls", f.candidate_calls},
              {"cases", f.cases}};
}

// One configuration of the summary: {"validity": v, "calls": n, "cases": n}.
StatusOr<std::tuple<double, int64_t, int64_t>> SummaryEntry(const json& summary, const char* label) {
  auto it = summary.find(label);
  if (it == summary.end() || !it->is_object() || !it->contains("validity") ||
      !(*it)["validity"].is_number() || !it->contains("calls") || !(*it)["calls"].is_number_integer())
    return Status::InvalidArgument(std::string("the eval summary has no ") + label + " figures");
  return std::make_tuple((*it)["validity"].get<double>(), (*it)["calls"].get<int64_t>(),
                         it->value("cases", int64_t{0}));
}

}  // namespace

std::string DeploymentPrecision::Summary() const {
  return "prefill=" + prefill.weights + "/" + prefill.kv_cache + " decode=" + decode.weights + "/" +
         decode.kv_cache;
}

DeploymentPrecision PrecisionOf(const DeploymentSpec& spec) {
  return {{spec.prefill.weights, spec.prefill.kv_cache}, {spec.decode.weights, spec.decode.kv_cache}};
}

std::optional<PoolPrecision> PoolPrecisionOf(const json* pool) {
  if (pool == nullptr) return std::nullopt;
  FieldReader r(*pool);
  return PoolPrecision{r.String("/spec/weights", "bf16"), r.String("/spec/kvCache", "bf16")};
}

StatusOr<GateFigures> GateResultOf(const json& pod) {
  FieldReader r(pod);
  const std::string phase = r.String("/status/phase", "");
  const json* statuses = nullptr;
  if (const json* st = r.Object("/status"); st != nullptr && st->contains("containerStatuses") &&
                                            st->at("containerStatuses").is_array() &&
                                            !st->at("containerStatuses").empty()) {
    statuses = &st->at("containerStatuses");
  }
  const json* terminated = nullptr;
  if (statuses != nullptr && (*statuses)[0].is_object()) {
    const auto state = (*statuses)[0].find("state");
    if (state != (*statuses)[0].end() && state->is_object() && state->contains("terminated") &&
        state->at("terminated").is_object())
      terminated = &state->at("terminated");
  }
  if ((phase != "Succeeded" && phase != "Failed") || terminated == nullptr)
    return Status::Unavailable("the evaluation is running");
  const std::string message = terminated->value("message", std::string());
  const int64_t exit_code = terminated->contains("exitCode") && (*terminated)["exitCode"].is_number_integer()
                                ? (*terminated)["exitCode"].get<int64_t>()
                                : -1;
  if (phase == "Failed" || exit_code != 0) {
    return Status::FailedPrecondition("the evaluation failed (exit code " + std::to_string(exit_code) +
                                      "): " + message.substr(0, 300));
  }
  const json summary = json::parse(message, nullptr, false);
  if (summary.is_discarded() || !summary.is_object())
    return Status::InvalidArgument("the evaluation's termination message is not its JSON summary");
  GateFigures f;
  ASSIGN_OR_RETURN(const auto baseline, SummaryEntry(summary, "baseline"));
  ASSIGN_OR_RETURN(const auto candidate, SummaryEntry(summary, "candidate"));
  std::tie(f.baseline_validity, f.baseline_calls, f.cases) = baseline;
  std::tie(f.candidate_validity, f.candidate_calls, std::ignore) = candidate;
  return f;
}

GateDecision DecideQualityGate(const QualityGateSpec& gate, const GateObservation& o) {
  GateDecision d;
  d.pools = o.wanted;
  const std::string target = o.wanted.Summary();
  const bool same_target = o.previous.is_object() && o.previous.value("target", std::string()) == target;
  const std::string phase = same_target ? o.previous.value("phase", std::string()) : "";
  // Nothing to gate: no gate, pools not created yet, or they already run the wanted precision
  // (and no evaluation of it is waiting for its verdict to be recorded).
  if (!gate.enabled || !o.serving.has_value() || (*o.serving == o.wanted && phase != kPhaseEvaluating)) {
    d.rollout = gate.enabled && same_target ? o.previous : json();
    return d;
  }
  // Decided and recorded: the canary and the eval Pod go; the pools stay as decided.
  if (phase == kPhasePromoted || phase == kPhaseRefused) {
    d.rollout = o.previous;
    if (phase == kPhaseRefused) d.pools = *o.serving;
    return d;
  }
  d.rollout = json{{"phase", kPhaseEvaluating},
                   {"target", target},
                   {"from", o.serving->Summary()},
                   {"startTime", phase == kPhaseEvaluating ? o.previous.value("startTime", o.now) : o.now}};
  d.pools = *o.serving;
  d.canary = true;
  d.eval_pod = o.eval_pod != nullptr || o.canary_ready;
  if (o.eval_pod == nullptr) {
    d.rollout["message"] = o.canary_ready ? "canary ready; evaluation starting" : "waiting for the canary";
    if (phase != kPhaseEvaluating) {
      d.event = GateEvent{"Normal", "QualityGateEvaluating",
                          "evaluating " + target + " on a canary before it replaces " + o.serving->Summary()};
    }
    return d;
  }
  StatusOr<GateFigures> figures = GateResultOf(*o.eval_pod);
  if (!figures.ok() && figures.status().code() == StatusCode::kUnavailable) {
    d.rollout["message"] = "evaluation running";
    return d;
  }
  // The verdict. The canary and the eval Pod stay until it is recorded (the next reconcile).
  std::string reason, message;
  bool pass = false;
  if (!figures.ok()) {
    reason = "EvaluationFailed";
    message = figures.status().message();
  } else {
    const GateFigures& f = *figures;
    d.rollout["figures"] = FiguresJson(f);
    const double drop = f.baseline_validity >= 0 && f.candidate_validity >= 0
                            ? 100 * (f.baseline_validity - f.candidate_validity)
                            : 0;
    const std::string figures_text = "candidate validity " + Percent(f.candidate_validity) + " (" +
                                     std::to_string(f.candidate_calls) + " calls), baseline " +
                                     Percent(f.baseline_validity) + " (" + std::to_string(f.baseline_calls) +
                                     " calls), " + std::to_string(f.cases) + " cases";
    if (f.candidate_validity < 0 || f.candidate_validity < gate.min_validity) {
      reason = "ValidityBelowThreshold";
      message = figures_text + ": below the minimum " + Fixed(100 * gate.min_validity, 1) + "%";
    } else if (drop > gate.max_validity_drop +
                          1e-9) {  // validity ratios' rounding: a drop of exactly the limit passes
      reason = "ValidityDrop";
      message = figures_text + ": a drop of " + Fixed(drop, 2) + " points, more than the " +
                Fixed(gate.max_validity_drop, 2) + " allowed";
    } else {
      pass = true;
      reason = "Passed";
      message = figures_text + ": within the gate (minimum " + Fixed(100 * gate.min_validity, 1) +
                "%, largest drop " + Fixed(gate.max_validity_drop, 2) + " points)";
    }
  }
  d.rollout["phase"] = pass ? kPhasePromoted : kPhaseRefused;
  d.rollout["reason"] = reason;
  d.rollout["message"] = message;
  d.rollout["completionTime"] = o.now;
  d.pools = pass ? o.wanted : *o.serving;
  d.event = pass ? GateEvent{"Normal", "QualityGatePassed", target + " promoted: " + message}
                 : GateEvent{"Warning", "QualityGateFailed",
                             target + " refused (" + reason + "): " + message + "; the pools keep " +
                                 o.serving->Summary()};
  return d;
}

Condition QualityGateCondition(const json& rollout) {
  const std::string phase = rollout.value("phase", std::string());
  const std::string message = rollout.value("message", std::string());
  if (phase == kPhasePromoted) return {"QualityGatePassed", true, "Passed", message};
  if (phase == kPhaseRefused)
    return {"QualityGatePassed", false, rollout.value("reason", std::string("Refused")), message};
  return {"QualityGatePassed", false, "Evaluating",
          "evaluating " + rollout.value("target", std::string()) + ": " + message};
}

std::string CanaryName(std::string_view deployment) { return std::string(deployment) + "-gate"; }

std::string EvalPodName(std::string_view deployment, const DeploymentPrecision& target) {
  return std::string(deployment) + "-gate-eval-" + ContentHash(target.Summary()).substr(0, 8);
}

std::vector<DesiredObject> CanaryChildren(const DeploymentSpec& spec, const json& mdep) {
  DeploymentSpec canary = spec;
  canary.name = CanaryName(spec.name);
  canary.router_replicas = 1;
  canary.gpu_budget.reset();
  for (PoolSpec* p : {&canary.prefill, &canary.decode}) {
    p->replicas = 1;
    p->autoscaling = json();
    p->autoscale = AutoscalePolicy{};
  }
  return PlanChildren(canary, mdep);
}

DesiredObject EvalPod(const DeploymentSpec& s, const json& mdep) {
  const QualityGateSpec& g = s.quality_gate;
  auto url = [&](const std::string& service) {
    return "http://" + service + "." + s.ns + ".svc:" + std::to_string(s.router_port) + "/v1";
  };
  json args = json::array({"eval", "tools", "--url", "baseline=" + url(s.name), "--url",
                           "candidate=" + url(CanaryName(s.name)), "--model-name", s.common.model_name,
                           "--suite", g.suite, "--max-tokens", std::to_string(g.max_tokens), "--out",
                           "/tmp/gate", "--summary", "/dev/termination-log"});
  if (g.cases > 0) {
    args.push_back("--limit");
    args.push_back(std::to_string(g.cases));
  }
  json env = json::array();
  if (!s.api_key_secret.empty()) {
    // The first key of the router's Secret (a newline-separated list); $(VAR) is expanded by the kubelet.
    env.push_back({{"name", "TANDEM_API_KEY"},
                   {"valueFrom", {{"secretKeyRef", {{"name", s.api_key_secret}, {"key", s.api_key_key}}}}}});
    args.push_back("--api-key");
    args.push_back("$(TANDEM_API_KEY)");
  }
  json mounts = json::array({json{{"name", "tmp"}, {"mountPath", "/tmp"}}});
  json volumes = json::array({json{{"name", "tmp"}, {"emptyDir", json::object()}}});
  if (!s.common.model_volume.is_null()) {
    json volume = {{"name", "model"}};
    if (!s.common.claim_name.empty()) {
      volume["persistentVolumeClaim"] = {{"claimName", s.common.claim_name}, {"readOnly", true}};
    } else {
      volume["hostPath"] = {{"path", s.common.host_path}, {"type", "Directory"}};
    }
    volumes.push_back(volume);
    mounts.push_back({{"name", "model"}, {"mountPath", s.common.mount_path}, {"readOnly", true}});
  }
  json container = {{"name", "eval"},
                    {"image", s.common.image},
                    {"command", json::array({"tandem"})},
                    {"args", args},
                    {"env", env},
                    {"volumeMounts", mounts},
                    {"terminationMessagePolicy", "FallbackToLogsOnError"},
                    {"resources", {{"requests", {{"cpu", "100m"}, {"memory", "256Mi"}}}}},
                    {"securityContext",
                     {{"allowPrivilegeEscalation", false},
                      {"capabilities", {{"drop", json::array({"ALL"})}}},
                      {"readOnlyRootFilesystem", true},
                      {"runAsNonRoot", true},
                      {"runAsUser", 65532}}}};
  if (!s.common.image_pull_policy.empty()) container["imagePullPolicy"] = s.common.image_pull_policy;
  json pod_spec = {
      {"restartPolicy", "Never"},
      {"automountServiceAccountToken", false},
      {"enableServiceLinks", false},
      {"securityContext", {{"runAsNonRoot", true}, {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
      {"containers", json::array({container})},
      {"volumes", volumes}};
  if (!s.common.image_pull_secrets.empty()) pod_spec["imagePullSecrets"] = s.common.image_pull_secrets;
  json meta = {{"name", EvalPodName(s.name, PrecisionOf(s))},
               {"namespace", s.ns},
               {"labels", CommonLabels(s.name, "quality-gate")},
               {"annotations", {{"tandem.dev/gate-target", PrecisionOf(s).Summary()}}},
               {"ownerReferences", json::array({ControllerReference(mdep)})}};
  // A Pod's spec cannot change: set once, at creation.
  return {json{{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", meta}, {"spec", pod_spec}}, {"/spec"}};
}

}  // namespace tandem::controller::reconcile
