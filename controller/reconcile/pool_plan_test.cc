#include "controller/reconcile/pool_plan.h"

#include <string>

#include <gtest/gtest.h>

#include "controller/reconcile/deployment_plan.h"
#include "controller/reconcile/engine_config.h"

namespace tandem::controller::reconcile {
namespace {

// The decode ModelPool of a GPU deployment, as the API server returns it.
json GpuDecodePool() {
  return json::parse(R"({
    "apiVersion": "tandem.dev/v1alpha1", "kind": "ModelPool",
    "metadata": {"name": "kimi-decode", "namespace": "ml", "uid": "pool-uid", "generation": 3},
    "spec": {
      "deploymentName": "kimi", "role": "decode", "replicas": 2, "tensorParallel": 8,
      "weights": "int4", "kvCache": "fp8_e4m3", "image": "registry/tandem:1",
      "imagePullSecrets": [{"name": "regcred"}],
      "model": {"name": "moonshotai/Kimi-K2.6", "path": "/models/kimi",
                "volume": {"persistentVolumeClaim": {"claimName": "weights", "readOnly": true}, "mountPath": "/models"}},
      "resources": {"limits": {"nvidia.com/gpu": 8, "memory": "512Gi"}},
      "nodeSelector": {"gpu": "h200"},
      "integrity": {"pageTags": true, "transferChecksum": true}
    }})");
}

const json& Child(const PoolPlan& plan, const std::string& kind) {
  for (const DesiredObject& d : plan.children) {
    if (d.object["kind"] == kind) return d.object;
  }
  static const json kNone;
  ADD_FAILURE() << "no " << kind;
  return kNone;
}

TEST(PlanPool, ChildrenAreNamedAfterThePoolAndOwnedByIt) {
  StatusOr<PoolPlan> plan = PlanPool(GpuDecodePool());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->children.size(), 3u);
  for (const DesiredObject& d : plan->children) {
    EXPECT_EQ(d.object["metadata"]["name"], "kimi-decode");
    EXPECT_EQ(d.object["metadata"]["ownerReferences"][0]["kind"], "ModelPool");
    EXPECT_EQ(d.object["metadata"]["ownerReferences"][0]["uid"], "pool-uid");
    EXPECT_EQ(d.object["metadata"]["labels"]["tandem.dev/pool"], "decode");
    EXPECT_EQ(d.object["metadata"]["labels"]["app.kubernetes.io/component"], "decode");
  }
  json selector = {{"tandem.dev/deployment", "kimi"}, {"tandem.dev/pool", "decode"}};
  EXPECT_EQ(Child(*plan, "Service")["spec"]["clusterIP"], "None");
  EXPECT_EQ(Child(*plan, "Service")["spec"]["selector"], selector);
  EXPECT_EQ(Child(*plan, "PodDisruptionBudget")["spec"]["maxUnavailable"], 1);
  EXPECT_EQ(Child(*plan, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"], selector);
  const json& sts = Child(*plan, "StatefulSet");
  EXPECT_EQ(sts["spec"]["replicas"], 2);
  EXPECT_EQ(sts["spec"]["serviceName"], "kimi-decode");
  EXPECT_EQ(sts["spec"]["selector"]["matchLabels"], selector);
  for (auto it = selector.begin(); it != selector.end(); ++it) {
    EXPECT_EQ(sts["spec"]["template"]["metadata"]["labels"][it.key()], it.value());
  }
  EXPECT_EQ(PoolSelectorString("kimi", "decode"), "tandem.dev/deployment=kimi,tandem.dev/pool=decode");
}

TEST(PlanPool, AgentContainerRunsTheRoleWithGpusProbesAndRestrictedSecurity) {
  StatusOr<PoolPlan> plan = PlanPool(GpuDecodePool());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const json& pod = Child(*plan, "StatefulSet")["spec"]["template"]["spec"];
  const json& c = pod["containers"][0];
  EXPECT_EQ(c["image"], "registry/tandem:1");
  EXPECT_EQ(c["command"], json::array({"tandem-agent"}));
  EXPECT_EQ(c["args"], json::parse(R"(["--config", "/etc/tandem/decode.yaml", "--role", "decode"])"));
  EXPECT_EQ(c["ports"], json::parse(R"([{"name": "http", "containerPort": 8000, "protocol": "TCP"},
                                       {"name": "grpc", "containerPort": 50051, "protocol": "TCP"},
                                       {"name": "metrics", "containerPort": 9400, "protocol": "TCP"}])"));
  EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"], "8");
  EXPECT_EQ(c["resources"]["requests"]["nvidia.com/gpu"], "8");
  EXPECT_EQ(c["resources"]["limits"]["memory"], "512Gi");
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["path"], "/healthz");
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["path"], "/readyz");
  EXPECT_EQ(c["securityContext"]["allowPrivilegeEscalation"], false);
  EXPECT_EQ(c["securityContext"]["capabilities"]["drop"], json::array({"ALL"}));
  EXPECT_EQ(c["securityContext"]["readOnlyRootFilesystem"], true);
  EXPECT_EQ(c["securityContext"]["runAsNonRoot"], true);
  EXPECT_EQ(pod["securityContext"]["runAsNonRoot"], true);
  EXPECT_EQ(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
  EXPECT_EQ(pod["automountServiceAccountToken"], false);
  EXPECT_EQ(pod["nodeSelector"]["gpu"], "h200");
  EXPECT_EQ(pod["imagePullSecrets"][0]["name"], "regcred");
  EXPECT_EQ(pod["tolerations"][0]["key"], "nvidia.com/gpu");
  // The model volume, the config ConfigMap (this pool's key only), /tmp and /dev/shm for NCCL.
  json volumes = json::object();
  for (const json& v : pod["volumes"]) volumes[v["name"].get<std::string>()] = v;
  EXPECT_EQ(volumes["model"]["persistentVolumeClaim"]["claimName"], "weights");
  EXPECT_EQ(volumes["config"]["configMap"]["name"], "kimi-config");
  EXPECT_EQ(volumes["config"]["configMap"]["items"][0]["key"], "decode.yaml");
  EXPECT_EQ(volumes["dshm"]["emptyDir"]["medium"], "Memory");
  EXPECT_TRUE(volumes.contains("tmp"));
  json mounts = json::object();
  for (const json& m : c["volumeMounts"]) mounts[m["name"].get<std::string>()] = m["mountPath"];
  EXPECT_EQ(
      mounts,
      json::parse(R"({"config": "/etc/tandem", "tmp": "/tmp", "model": "/models", "dshm": "/dev/shm"})"));
}

TEST(PlanPool, CpuPoolRequestsNoGpus) {
  json pool = GpuDecodePool();
  pool["spec"]["tensorParallel"] = 1;
  pool["spec"]["resources"] = {{"requests", {{"cpu", 2}}}};
  StatusOr<PoolPlan> plan = PlanPool(pool);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const json& pod = Child(*plan, "StatefulSet")["spec"]["template"]["spec"];
  EXPECT_EQ(pod["containers"][0]["resources"], json::parse(R"({"requests": {"cpu": "2"}})"));
  EXPECT_FALSE(pod.contains("tolerations"));
  for (const json& v : pod["volumes"]) EXPECT_NE(v["name"], "dshm");
}

TEST(PlanPool, ConfigHashFollowsTheRenderedConfig) {
  json pool = GpuDecodePool();
  StatusOr<PoolPlan> plan = PlanPool(pool);
  ASSERT_TRUE(plan.ok());
  std::string hash =
      Child(*plan, "StatefulSet")["spec"]["template"]["metadata"]["annotations"]["tandem.dev/config-hash"];
  EXPECT_EQ(hash, ContentHash(RenderPoolConfig("kimi", plan->spec.common, plan->spec.pool)));
  // The pool's tensorParallel reaches the agent's engine config.
  EXPECT_EQ(
      json::parse(RenderPoolConfig("kimi", plan->spec.common, plan->spec.pool))["engine"]["tensorParallel"],
      8);
  // Scaling does not roll the pods; a precision change does.
  pool["spec"]["replicas"] = 5;
  EXPECT_EQ(Child(*PlanPool(pool),
                  "StatefulSet")["spec"]["template"]["metadata"]["annotations"]["tandem.dev/config-hash"],
            hash);
  pool["spec"]["kvCache"] = "bf16";
  EXPECT_NE(Child(*PlanPool(pool),
                  "StatefulSet")["spec"]["template"]["metadata"]["annotations"]["tandem.dev/config-hash"],
            hash);
}

TEST(PlanPool, DeploymentPlannedPoolsPlanCleanly) {
  json mdep = json::parse(R"({
    "apiVersion": "tandem.dev/v1alpha1", "kind": "ModelDeployment",
    "metadata": {"name": "m", "namespace": "ns", "uid": "u"},
    "spec": {"model": {"name": "x", "dummy": {"preset": "tiny"}}, "decode": {"weights": "int4"}}})");
  StatusOr<DeploymentPlan> plan = PlanDeployment(mdep);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  for (const DesiredObject& d : plan->children) {
    if (d.object["kind"] != "ModelPool") continue;
    json pool = d.object;
    pool["metadata"]["uid"] = "pool";
    StatusOr<PoolPlan> pool_plan = PlanPool(pool);
    ASSERT_TRUE(pool_plan.ok()) << pool_plan.status().ToString();
    // The pool renders the same agent config the deployment put in the ConfigMap.
    std::string role = pool["spec"]["role"];
    EXPECT_EQ(RenderPoolConfig("m", pool_plan->spec.common, pool_plan->spec.pool),
              plan->children[0].object["data"][role + ".yaml"].get<std::string>());
  }
}

struct InvalidPool {
  const char* name;
  const char* patch;
  const char* error;
};
class PlanPoolInvalid : public testing::TestWithParam<InvalidPool> {};

TEST_P(PlanPoolInvalid, IsRejectedWithTheField) {
  json pool = GpuDecodePool();
  pool.merge_patch(json::parse(GetParam().patch));
  StatusOr<PoolPlan> plan = PlanPool(pool);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find(GetParam().error), std::string::npos) << plan.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Table, PlanPoolInvalid,
    testing::Values(
        InvalidPool{"BadRole", R"({"spec": {"role": "router"}})", "spec.role"},
        InvalidPool{"NoDeployment", R"({"spec": {"deploymentName": null}})", "spec.deploymentName"},
        InvalidPool{"GpuMismatch", R"({"spec": {"tensorParallel": 4}})", "tensorParallel is 4"},
        InvalidPool{"NegativeReplicas", R"({"spec": {"replicas": -1}})", "spec.replicas"},
        InvalidPool{"NameTooLong",
                    R"({"metadata": {"name": "a2345678901234567890123456789012345678901234567890123"}})",
                    "at most 52"}),
    [](const testing::TestParamInfo<InvalidPool>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tandem::controller::reconcile
