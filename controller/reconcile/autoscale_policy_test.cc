#include "controller/reconcile/autoscale_policy.h"

#include <ostream>
#include <string>

#include <gtest/gtest.h>

#include "controller/reconcile/deployment_spec.h"

namespace tandem::controller::reconcile {
namespace {

TEST(ParseAutoscalePolicy, AbsentIsDisabledWithTheCrdDefaults) {
  StatusOr<AutoscalePolicy> p = ParseAutoscalePolicy(json(), "spec.autoscaling");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_FALSE(p->enabled);
  EXPECT_FALSE(p->Builtin());
  EXPECT_EQ(p->mode, AutoscaleMode::kBuiltin);
  EXPECT_EQ(p->min_replicas, 1);
  EXPECT_DOUBLE_EQ(p->target_kv_cache_usage, 0.8);
  EXPECT_EQ(p->target_waiting_requests_per_replica, 4);
  EXPECT_EQ(p->target_waiting_prefill_tokens_per_replica, 8192);
  EXPECT_FALSE(p->target_ttft_seconds.has_value());
  EXPECT_FALSE(p->target_itl_seconds.has_value());
  EXPECT_EQ(p->scale_up_delay_seconds, 30);
  EXPECT_EQ(p->scale_down_delay_seconds, 300);
  EXPECT_EQ(p->max_scale_up_step, 4);
  EXPECT_EQ(p->max_scale_down_step, 1);
}

TEST(ParseAutoscalePolicy, ReadsEveryField) {
  StatusOr<AutoscalePolicy> p = ParseAutoscalePolicy(json::parse(R"({
      "enabled": true, "mode": "builtin", "minReplicas": 2, "maxReplicas": 8,
      "targetKvCacheUsage": 0.85, "targetWaitingRequestsPerReplica": 0,
      "targetWaitingPrefillTokensPerReplica": 4096, "targetTTFTSeconds": 1.5, "targetITLSeconds": 0.05,
      "scaleUpDelaySeconds": 0, "scaleDownDelaySeconds": 600, "maxScaleUpStep": 2, "maxScaleDownStep": 3})"),
                                                     "spec.decode.autoscaling");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->Builtin());
  EXPECT_EQ(p->min_replicas, 2);
  EXPECT_EQ(p->max_replicas, 8);
  EXPECT_DOUBLE_EQ(p->target_kv_cache_usage, 0.85);
  EXPECT_EQ(p->target_waiting_requests_per_replica, 0);  // 0: the signal is off
  EXPECT_EQ(p->target_waiting_prefill_tokens_per_replica, 4096);
  EXPECT_DOUBLE_EQ(p->target_ttft_seconds.value_or(0), 1.5);
  EXPECT_DOUBLE_EQ(p->target_itl_seconds.value_or(0), 0.05);
  EXPECT_EQ(p->scale_up_delay_seconds, 0);
  EXPECT_EQ(p->scale_down_delay_seconds, 600);
  EXPECT_EQ(p->max_scale_up_step, 2);
  EXPECT_EQ(p->max_scale_down_step, 3);
}

TEST(ParseAutoscalePolicy, ExternalModeNeedsNoBounds) {
  StatusOr<AutoscalePolicy> p =
      ParseAutoscalePolicy(json::parse(R"({"enabled": true, "mode": "external"})"), "spec.autoscaling");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->mode, AutoscaleMode::kExternal);
  EXPECT_TRUE(p->enabled);
  EXPECT_FALSE(p->Builtin());
}

struct BadPolicy {
  const char* name;
  const char* autoscaling;
  const char* error;  // the whole message: the field, under the prefix, and what is wrong
};

void PrintTo(const BadPolicy& b, std::ostream* os) { *os << b.name; }

class ParseAutoscalePolicyInvalid : public testing::TestWithParam<BadPolicy> {};

TEST_P(ParseAutoscalePolicyInvalid, NamesTheField) {
  StatusOr<AutoscalePolicy> p =
      ParseAutoscalePolicy(json::parse(GetParam().autoscaling), "spec.decode.autoscaling");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p.status().message(), GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    Table, ParseAutoscalePolicyInvalid,
    testing::Values(
        BadPolicy{"NotAnObject", "[1]", "spec.decode.autoscaling: want an object"},
        BadPolicy{"EnabledNotBool", R"({"enabled": "yes"})",
                  "spec.decode.autoscaling.enabled: want true or false"},
        BadPolicy{"UnknownMode", R"({"mode": "keda"})",
                  "spec.decode.autoscaling.mode: 'keda' is not builtin or external"},
        BadPolicy{
            "MaxRequiredWhenBuiltin", R"({"enabled": true})",
            "spec.decode.autoscaling.maxReplicas: required when autoscaling is enabled in builtin mode"},
        BadPolicy{"MinZero", R"({"minReplicas": 0})", "spec.decode.autoscaling.minReplicas: must be >= 1"},
        BadPolicy{"MaxNotInteger", R"({"maxReplicas": 2.5})",
                  "spec.decode.autoscaling.maxReplicas: want an integer"},
        BadPolicy{"MaxBelowMin", R"({"minReplicas": 5, "maxReplicas": 2})",
                  "spec.decode.autoscaling.maxReplicas: 2 is below minReplicas 5"},
        BadPolicy{"MaxPastInt32", R"({"maxReplicas": 2147483648})",
                  "spec.decode.autoscaling.maxReplicas: must be at most 2147483647"},
        BadPolicy{"KvTargetZero", R"({"targetKvCacheUsage": 0})",
                  "spec.decode.autoscaling.targetKvCacheUsage: want a number in (0, 1]"},
        BadPolicy{"KvTargetAboveOne", R"({"targetKvCacheUsage": 1.5})",
                  "spec.decode.autoscaling.targetKvCacheUsage: want a number in (0, 1]"},
        BadPolicy{"KvTargetString", R"({"targetKvCacheUsage": "80%"})",
                  "spec.decode.autoscaling.targetKvCacheUsage: want a number"},
        BadPolicy{"WaitingNegative", R"({"targetWaitingRequestsPerReplica": -1})",
                  "spec.decode.autoscaling.targetWaitingRequestsPerReplica: must be >= 0"},
        BadPolicy{"PrefillTokensFraction", R"({"targetWaitingPrefillTokensPerReplica": 0.5})",
                  "spec.decode.autoscaling.targetWaitingPrefillTokensPerReplica: want an integer"},
        BadPolicy{"TtftZero", R"({"targetTTFTSeconds": 0})",
                  "spec.decode.autoscaling.targetTTFTSeconds: want a number of seconds above 0"},
        BadPolicy{"ItlString", R"({"targetITLSeconds": "50ms"})",
                  "spec.decode.autoscaling.targetITLSeconds: want a number"},
        BadPolicy{"UpDelayNegative", R"({"scaleUpDelaySeconds": -5})",
                  "spec.decode.autoscaling.scaleUpDelaySeconds: must be >= 0"},
        BadPolicy{"DownDelayNegative", R"({"scaleDownDelaySeconds": -1})",
                  "spec.decode.autoscaling.scaleDownDelaySeconds: must be >= 0"},
        BadPolicy{"UpStepZero", R"({"maxScaleUpStep": 0})",
                  "spec.decode.autoscaling.maxScaleUpStep: must be >= 1"},
        BadPolicy{"DownStepZero", R"({"maxScaleDownStep": 0})",
                  "spec.decode.autoscaling.maxScaleDownStep: must be >= 1"}),
    [](const testing::TestParamInfo<BadPolicy>& info) { return std::string(info.param.name); });

json Deployment(const char* spec_patch) {
  json mdep = json::parse(R"({
    "apiVersion": "tandem.dev/v1alpha1", "kind": "ModelDeployment",
    "metadata": {"name": "kimi", "namespace": "ml", "uid": "u1"},
    "spec": {"model": {"name": "m", "dummy": {"preset": "tiny"}}, "image": "tandem:1"}})");
  mdep["spec"].merge_patch(json::parse(spec_patch));
  return mdep;
}

TEST(ParseDeploymentSpec, ReadsEachPoolsPolicyAndTheGpuBudget) {
  StatusOr<DeploymentSpec> s = ParseDeploymentSpec(Deployment(R"({
      "gpuBudget": 48,
      "prefill": {"autoscaling": {"enabled": true, "mode": "external"}},
      "decode": {"autoscaling": {"enabled": true, "maxReplicas": 4, "targetITLSeconds": 0.05}}})"));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->gpu_budget, 48);
  EXPECT_EQ(s->prefill.autoscale.mode, AutoscaleMode::kExternal);
  EXPECT_TRUE(s->prefill.autoscale.enabled);  // the deployment leaves its replicas to the scale subresource
  EXPECT_TRUE(s->decode.autoscale.Builtin());
  EXPECT_EQ(s->decode.autoscale.max_replicas, 4);
  EXPECT_DOUBLE_EQ(s->decode.autoscale.target_itl_seconds.value_or(0), 0.05);

  StatusOr<DeploymentSpec> none = ParseDeploymentSpec(Deployment(R"({"gpuBudget": null})"));
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->gpu_budget.has_value());
  EXPECT_FALSE(none->decode.autoscale.enabled);
}

TEST(ParseDeploymentSpec, BadPolicyOrBudgetNamesTheField) {
  StatusOr<DeploymentSpec> s = ParseDeploymentSpec(Deployment(R"({"gpuBudget": -8})"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "spec.gpuBudget: must be >= 0");
  s = ParseDeploymentSpec(Deployment(R"({"gpuBudget": "64"})"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "spec.gpuBudget: want an integer");
  s = ParseDeploymentSpec(Deployment(R"({"prefill": {"autoscaling": {"maxScaleUpStep": 0}}})"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "spec.prefill.autoscaling.maxScaleUpStep: must be >= 1");
}

TEST(ParseModelPoolSpec, PolicyErrorsNameThePoolsField) {
  json pool = json::parse(R"({
    "apiVersion": "tandem.dev/v1alpha1", "kind": "ModelPool",
    "metadata": {"name": "kimi-decode", "namespace": "ml", "uid": "u2"},
    "spec": {"deploymentName": "kimi", "role": "decode", "image": "tandem:1",
             "model": {"name": "m", "dummy": {"preset": "tiny"}},
             "autoscaling": {"enabled": true, "maxReplicas": 4, "mode": "hpa"}}})");
  StatusOr<ModelPoolSpec> s = ParseModelPoolSpec(pool);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "spec.autoscaling.mode: 'hpa' is not builtin or external");
}

}  // namespace
}  // namespace tandem::controller::reconcile
