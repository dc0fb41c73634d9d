// The quality gate's pure parts: the decision table, the eval Pod's result, the spec checks and
// what the canary and the eval Pod look like.
#include "controller/reconcile/quality_gate.h"

#include <gtest/gtest.h>

#include "controller/reconcile/deployment_plan.h"

namespace tandem::controller::reconcile {
namespace {

const DeploymentPrecision kBf16{{"bf16", "bf16"}, {"bf16", "bf16"}};
const DeploymentPrecision kInt4{{"bf16", "bf16"}, {"int4", "bf16"}};

QualityGateSpec Gate() {
  QualityGateSpec g;
  g.enabled = true;
  g.suite = "/models/m/suite.jsonl";
  g.min_validity = 0.9;
  g.max_validity_drop = 1.0;
  return g;
}

json Finished(int exit_code, const std::string& message) {
  return json{
      {"status",
       {{"phase", exit_code == 0 ? "Succeeded" : "Failed"},
        {"containerStatuses",
         json::array({{{"name", "eval"},
                       {"state", {{"terminated", {{"exitCode", exit_code}, {"message", message}}}}}}})}}}};
}

std::string Summary(double baseline, double candidate) {
  return json{{"baseline", {{"validity", baseline}, {"calls", 50}, {"cases", 40}}},
              {"candidate", {{"validity", candidate}, {"calls", 48}, {"cases", 40}}}}
      .dump();
}

GateObservation Observe(const DeploymentPrecision& wanted, const DeploymentPrecision& serving) {
  GateObservation o;
  o.wanted = wanted;
  o.serving = serving;
  o.now = "2026-12-05T10:00:00Z";
  return o;
}

TEST(QualityGateTest, NothingToGate) {
  GateObservation o = Observe(kInt4, kBf16);
  QualityGateSpec off;
  GateDecision d = DecideQualityGate(off, o);  // no gate: the spec's precision at once
  EXPECT_EQ(d.pools, kInt4);
  EXPECT_FALSE(d.canary);
  EXPECT_TRUE(d.rollout.is_null());
  o.serving.reset();  // pools being created: nothing runs yet to protect
  d = DecideQualityGate(Gate(), o);
  EXPECT_EQ(d.pools, kInt4);
  EXPECT_FALSE(d.canary || d.eval_pod);
  d = DecideQualityGate(Gate(), Observe(kBf16, kBf16));
  EXPECT_EQ(d.pools, kBf16);
  EXPECT_FALSE(d.canary || d.eval_pod || d.event.has_value());
}

TEST(QualityGateTest, ANewPrecisionWaitsForTheCanaryThenItsEvaluation) {
  GateObservation o = Observe(kInt4, kBf16);
  GateDecision d = DecideQualityGate(Gate(), o);
  EXPECT_EQ(d.pools, kBf16) << "the pools keep serving";
  EXPECT_TRUE(d.canary);
  EXPECT_FALSE(d.eval_pod) << "not before the canary is ready";
  EXPECT_EQ(d.rollout["phase"], "Evaluating");
  EXPECT_EQ(d.rollout["target"], "prefill=bf16/bf16 decode=int4/bf16");
  ASSERT_TRUE(d.event.has_value());
  EXPECT_EQ(d.event->reason, "QualityGateEvaluating");

  o.previous = d.rollout;
  o.canary_ready = true;
  o.now = "2026-12-05T10:05:00Z";
  d = DecideQualityGate(Gate(), o);
  EXPECT_TRUE(d.canary && d.eval_pod);
  EXPECT_FALSE(d.event.has_value()) << "one Evaluating event per evaluation";
  EXPECT_EQ(d.rollout["startTime"], "2026-12-05T10:00:00Z");

  const json running = {{"status", {{"phase", "Running"}}}};
  o.eval_pod = &running;
  d = DecideQualityGate(Gate(), o);
  EXPECT_EQ(d.rollout["phase"], "Evaluating");
  EXPECT_EQ(d.rollout["message"], "evaluation running");
  EXPECT_EQ(d.pools, kBf16);
}

TEST(QualityGateTest, VerdictsAndTheirFigures) {
  struct Row {
    double baseline, candidate;
    const char* phase;
    const char* reason;
  };
  const Row rows[] = {{0.97, 0.965, "Promoted", "Passed"},
                      {0.97, 0.96, "Promoted", "Passed"},  // exactly the 1.0-point allowance
                      {0.97, 0.955, "Refused", "ValidityDrop"},
                      {0.97, 0.85, "Refused", "ValidityBelowThreshold"},
                      {0.80, 0.90, "Promoted", "Passed"},  // better than a weak baseline
                      {-1, 0.95, "Promoted", "Passed"},    // the baseline made no calls: no drop to measure
                      {0.97, -1, "Refused", "ValidityBelowThreshold"}};
  for (const Row& row : rows) {
    GateObservation o = Observe(kInt4, kBf16);
    o.previous = {{"phase", "Evaluating"}, {"target", kInt4.Summary()}, {"startTime", "t0"}};
    const json pod = Finished(0, Summary(row.baseline, row.candidate));
    o.eval_pod = &pod;
    const GateDecision d = DecideQualityGate(Gate(), o);
    SCOPED_TRACE(std::to_string(row.baseline) + " -> " + std::to_string(row.candidate));
    EXPECT_EQ(d.rollout["phase"], row.phase);
    EXPECT_EQ(d.rollout["reason"], row.reason);
    EXPECT_EQ(d.rollout["figures"]["candidateValidity"], row.candidate);
    EXPECT_EQ(d.pools, std::string(row.phase) == "Promoted" ? kInt4 : kBf16);
    EXPECT_TRUE(d.canary && d.eval_pod) << "kept until the verdict is recorded";
    ASSERT_TRUE(d.event.has_value());
    EXPECT_EQ(d.event->type, std::string(row.phase) == "Promoted" ? "Normal" : "Warning");
  }
}

TEST(QualityGateTest, AFailedEvaluationIsRefused) {
  GateObservation o = Observe(kInt4, kBf16);
  o.previous = {{"phase", "Evaluating"}, {"target", kInt4.Summary()}};
  json pod = Finished(2, "tandem eval tools: NOT_FOUND: suite /models/m/suite.jsonl: cannot open");
  o.eval_pod = &pod;
  GateDecision d = DecideQualityGate(Gate(), o);
  EXPECT_EQ(d.rollout["reason"], "EvaluationFailed");
  EXPECT_NE(d.rollout["message"].get<std::string>().find("exit code 2"), std::string::npos);
  pod = Finished(0, "not json");
  d = DecideQualityGate(Gate(), o);
  EXPECT_EQ(d.rollout["reason"], "EvaluationFailed");
  EXPECT_EQ(d.pools, kBf16);
}

TEST(QualityGateTest, RecordedVerdictsCleanUpAndHold) {
  GateObservation o = Observe(kInt4, kBf16);
  o.previous = {{"phase", "Refused"}, {"target", kInt4.Summary()}, {"reason", "ValidityDrop"}};
  GateDecision d = DecideQualityGate(Gate(), o);
  EXPECT_EQ(d.pools, kBf16) << "a refused target stays refused";
  EXPECT_FALSE(d.canary || d.eval_pod || d.event.has_value());
  EXPECT_EQ(d.rollout, o.previous);
  // The spec moves on: a new evaluation.
  GateObservation next = Observe(DeploymentPrecision{{"bf16", "bf16"}, {"bf16", "fp8_e4m3"}}, kBf16);
  next.previous = o.previous;
  d = DecideQualityGate(Gate(), next);
  EXPECT_EQ(d.rollout["phase"], "Evaluating");
  EXPECT_TRUE(d.canary);
  // Promoted and recorded; the pools have taken it.
  GateObservation done = Observe(kInt4, kInt4);
  done.previous = {{"phase", "Promoted"}, {"target", kInt4.Summary()}};
  d = DecideQualityGate(Gate(), done);
  EXPECT_EQ(d.pools, kInt4);
  EXPECT_FALSE(d.canary || d.eval_pod);
  EXPECT_EQ(d.rollout, done.previous);
}

TEST(QualityGateTest, ResultParsing) {
  EXPECT_EQ(GateResultOf(json{{"status", {{"phase", "Pending"}}}}).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(GateResultOf(json::object()).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(GateResultOf(Finished(0, R"({"baseline": {"validity": 1, "calls": 3}})")).status().code(),
            StatusCode::kInvalidArgument);
  StatusOr<GateFigures> f = GateResultOf(Finished(0, Summary(0.97, 0.96)));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_DOUBLE_EQ(f->baseline_validity, 0.97);
  EXPECT_EQ(f->candidate_calls, 48);
  EXPECT_EQ(f->cases, 40);
}

json Mdep(json rollout, std::string name = "gated") {
  return json{
      {"apiVersion", "tandem.dev/v1alpha1"},
      {"kind", "ModelDeployment"},
      {"metadata", {{"name", name}, {"namespace", "ns"}, {"uid", "u-1"}}},
      {"spec",
       {{"model",
         {{"name", "m"},
          {"path", "/models/m"},
          {"volume", {{"persistentVolumeClaim", {{"claimName", "models"}}}, {"mountPath", "/models"}}}}},
        {"decode", {{"weights", "int4"}, {"replicas", 3}}},
        {"router", {{"auth", {{"apiKeySecret", {{"name", "keys"}}}}}}},
        {"rollout", std::move(rollout)}}}};
}

TEST(QualityGateTest, SpecChecks) {
  StatusOr<DeploymentSpec> s = ParseDeploymentSpec(Mdep({{"qualityGate", {{"suite", "/models/m/s.jsonl"}}}}));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->quality_gate.enabled);
  EXPECT_DOUBLE_EQ(s->quality_gate.min_validity, 0.95);
  EXPECT_EQ(
      ParseDeploymentSpec(Mdep({{"qualityGate", {{"suite", "/elsewhere/s.jsonl"}}}})).status().message(),
      "spec.rollout.qualityGate.suite: '/elsewhere/s.jsonl' must lie under model.volume.mountPath (the eval "
      "Pod mounts the model volume)");
  EXPECT_FALSE(
      ParseDeploymentSpec(Mdep({{"qualityGate", {{"suite", "/models/s"}, {"minValidity", 1.5}}}})).ok());
  EXPECT_NE(ParseDeploymentSpec(Mdep({{"qualityGate", {{"suite", "/models/s"}}}}, std::string(40, 'a')))
                .status()
                .message()
                .find("longer than 39 characters"),
            std::string::npos);
  EXPECT_FALSE(ParseDeploymentSpec(Mdep(json::object())).value().quality_gate.enabled);
}

TEST(QualityGateTest, CanaryAndEvalPod) {
  StatusOr<DeploymentSpec> s =
      ParseDeploymentSpec(Mdep({{"qualityGate", {{"suite", "/models/m/s.jsonl"}, {"cases", 50}}}}));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const json mdep = Mdep(json::object());
  const std::vector<DesiredObject> canary = CanaryChildren(*s, mdep);
  std::vector<std::string> names;
  for (const DesiredObject& o : canary) {
    names.push_back(o.object["kind"].get<std::string>() + " " +
                    o.object["metadata"]["name"].get<std::string>());
    EXPECT_EQ(o.object["metadata"]["ownerReferences"][0]["name"], "gated");  // owned by the real one
    EXPECT_EQ(o.object["metadata"]["labels"][std::string(kDeploymentLabel)], "gated-gate");
  }
  EXPECT_EQ(names, (std::vector<std::string>{"ConfigMap gated-gate-config", "ModelPool gated-gate-prefill",
                                             "ModelPool gated-gate-decode", "Deployment gated-gate-router",
                                             "Service gated-gate"}));
  EXPECT_EQ(canary[2].object["spec"]["replicas"], 1);
  EXPECT_EQ(canary[2].object["spec"]["weights"], "int4");
  EXPECT_EQ(canary[2].object["spec"]["deploymentName"], "gated-gate");

  const DesiredObject pod = EvalPod(*s, mdep);
  EXPECT_EQ(pod.object["metadata"]["name"], EvalPodName("gated", PrecisionOf(*s)));
  EXPECT_EQ(pod.create_only, (std::vector<std::string>{"/spec"}));
  const json& c = pod.object["spec"]["containers"][0];
  const json args = c["args"];
  EXPECT_EQ(args[3], "baseline=http://gated.ns.svc:8000/v1");
  EXPECT_EQ(args[5], "candidate=http://gated-gate.ns.svc:8000/v1");
  EXPECT_NE(std::find(args.begin(), args.end(), "$(TANDEM_API_KEY)"), args.end());
  EXPECT_NE(std::find(args.begin(), args.end(), "50"), args.end());
  EXPECT_EQ(c["env"][0]["valueFrom"]["secretKeyRef"]["name"], "keys");
  EXPECT_EQ(pod.object["spec"]["volumes"][1]["persistentVolumeClaim"]["claimName"], "models");
  EXPECT_EQ(pod.object["spec"]["restartPolicy"], "Never");
}

}  // namespace
}  // namespace tandem::controller::reconcile
