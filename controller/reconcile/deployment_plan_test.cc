#include "controller/reconcile/deployment_plan.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "controller/reconcile/apply.h"
#include "controller/reconcile/deployment_status.h"
#include "controller/reconcile/engine_config.h"
#include "controller/reconcile/pool_plan.h"

namespace tandem::controller::reconcile {
namespace {

// A ModelDeployment as the API server returns tiny-cpu.yaml (CRD defaults applied).
json TinyCpu() {
  return json::parse(R"({
    "apiVersion": "tandem.dev/v1alpha1", "kind": "ModelDeployment",
    "metadata": {"name": "tiny-cpu", "namespace": "ml", "uid": "uid-1", "generation": 1},
    "spec": {
      "model": {"name": "tandem/tiny", "dummy": {"preset": "tiny", "seed": 1}},
      "router": {"replicas": 1, "port": 8000, "resources": {"requests": {"cpu": "100m"}}},
      "prefill": {"replicas": 1, "tensorParallel": 1, "weights": "bf16", "kvCache": "bf16",
                  "resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "2", "memory": "1Gi"}}},
      "decode": {"replicas": 2, "tensorParallel": 1, "weights": "bf16", "kvCache": "bf16"},
      "integrity": {"pageTags": true, "transferChecksum": true}
    }})");
}

const json& Child(const DeploymentPlan& plan, const std::string& kind, const std::string& name) {
  for (const DesiredObject& d : plan.children) {
    if (d.object["kind"] == kind && d.object["metadata"]["name"] == name) return d.object;
  }
  static const json kNone;
  ADD_FAILURE() << "no " << kind << " " << name;
  return kNone;
}

TEST(PlanDeployment, TinyCpuMakesPoolsConfigAndRouter) {
  StatusOr<DeploymentPlan> plan = PlanDeployment(TinyCpu());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  std::vector<std::string> kinds;
  for (const DesiredObject& d : plan->children) {
    kinds.push_back(d.object["kind"].get<std::string>() + "/" +
                    d.object["metadata"]["name"].get<std::string>());
    // Every child is owned by the deployment, in its namespace, with the standard labels.
    const json& meta = d.object["metadata"];
    EXPECT_EQ(meta["namespace"], "ml");
    ASSERT_EQ(meta["ownerReferences"].size(), 1u);
    EXPECT_EQ(meta["ownerReferences"][0]["uid"], "uid-1");
    EXPECT_EQ(meta["ownerReferences"][0]["controller"], true);
    EXPECT_EQ(meta["ownerReferences"][0]["blockOwnerDeletion"], true);
    EXPECT_EQ(meta["labels"]["app.kubernetes.io/managed-by"], "tandem-controller");
    EXPECT_EQ(meta["labels"]["app.kubernetes.io/instance"], "tiny-cpu");
    EXPECT_EQ(meta["labels"]["tandem.dev/deployment"], "tiny-cpu");
  }
  EXPECT_EQ(kinds, (std::vector<std::string>{"ConfigMap/tiny-cpu-config", "ModelPool/tiny-cpu-prefill",
                                             "ModelPool/tiny-cpu-decode", "Deployment/tiny-cpu-router",
                                             "Service/tiny-cpu"}));
  const json& decode = Child(*plan, "ModelPool", "tiny-cpu-decode");
  EXPECT_EQ(decode["metadata"]["labels"]["tandem.dev/pool"], "decode");
  EXPECT_EQ(decode["spec"]["deploymentName"], "tiny-cpu");
  EXPECT_EQ(decode["spec"]["role"], "decode");
  EXPECT_EQ(decode["spec"]["replicas"], 2);
  EXPECT_EQ(decode["spec"]["model"]["dummy"]["preset"], "tiny");
  EXPECT_EQ(decode["spec"]["image"], std::string(kDefaultImage));
  EXPECT_EQ(PrecisionSummary(plan->spec), "prefill=bf16/bf16 decode=bf16/bf16");
}

TEST(PlanDeployment, ConfigMapHoldsEachPoolsAgentConfig) {
  json mdep = TinyCpu();
  mdep["spec"]["decode"]["weights"] = "int4";
  mdep["spec"]["decode"]["kvCache"] = "fp8_e4m3";
  mdep["spec"]["decode"]["kvCacheMemory"] = "2Gi";
  mdep["spec"]["integrity"]["pageTags"] = false;
  StatusOr<DeploymentPlan> plan = PlanDeployment(mdep);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const json& cm = Child(*plan, "ConfigMap", "tiny-cpu-config");
  json decode = json::parse(cm["data"]["decode.yaml"].get<std::string>());
  EXPECT_EQ(decode["role"], "decode");
  EXPECT_EQ(decode["deployment"], "tiny-cpu");
  EXPECT_EQ(decode["model"]["weights"], "int4");
  EXPECT_EQ(decode["model"]["dummy"]["seed"], 1);
  EXPECT_EQ(decode["kvCache"]["dtype"], "fp8_e4m3");
  EXPECT_EQ(decode["kvCache"]["bytes"], 2147483648LL);
  EXPECT_EQ(decode["integrity"]["pageTags"], false);
  json prefill = json::parse(cm["data"]["prefill.yaml"].get<std::string>());
  EXPECT_EQ(prefill["model"]["weights"], "bf16");
  EXPECT_FALSE(prefill["kvCache"].contains("bytes"));
  json router = json::parse(cm["data"]["router.yaml"].get<std::string>());
  EXPECT_EQ(router["role"], "router");
  EXPECT_EQ(router["listen"]["httpPort"], 8000);

  // The content hash moves with the content, so the pods roll.
  std::string hash = cm["metadata"]["annotations"]["tandem.dev/config-hash"];
  mdep["spec"]["decode"]["weights"] = "fp8";
  StatusOr<DeploymentPlan> changed = PlanDeployment(mdep);
  ASSERT_TRUE(changed.ok());
  EXPECT_NE(
      Child(*changed, "ConfigMap", "tiny-cpu-config")["metadata"]["annotations"]["tandem.dev/config-hash"],
      hash);
  EXPECT_EQ(PrecisionSummary(changed->spec), "prefill=bf16/bf16 decode=fp8/fp8_e4m3");
}

TEST(PlanDeployment, RouterReferencesTheApiKeySecretWithoutCopyingIt) {
  json mdep = TinyCpu();
  mdep["spec"]["router"]["auth"] = {{"apiKeySecret", {{"name", "keys"}, {"key", "k"}}}};
  mdep["spec"]["router"]["port"] = 8080;
  StatusOr<DeploymentPlan> plan = PlanDeployment(mdep);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  for (const DesiredObject& d : plan->children) EXPECT_NE(d.object["kind"], "Secret");
  const json& router = Child(*plan, "Deployment", "tiny-cpu-router");
  const json& container = router["spec"]["template"]["spec"]["containers"][0];
  bool found = false;
  for (const json& env : container["env"]) {
    if (env["name"] == "TANDEM_API_KEYS") {
      EXPECT_EQ(env["valueFrom"]["secretKeyRef"], (json{{"name", "keys"}, {"key", "k"}}));
      found = true;
    }
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(container["args"], json::parse(R"(["--config", "/etc/tandem/router.yaml", "--role", "router"])"));
  EXPECT_EQ(container["ports"][0]["containerPort"], 8080);
  EXPECT_EQ(container["resources"]["requests"]["cpu"], "100m");
  const json& service = Child(*plan, "Service", "tiny-cpu");
  EXPECT_EQ(service["spec"]["ports"][0]["port"], 8080);
  EXPECT_EQ(service["spec"]["selector"], router["spec"]["selector"]["matchLabels"]);
  EXPECT_EQ(Contains(router["spec"]["template"]["metadata"]["labels"], service["spec"]["selector"]), true);
}

// spec.router.unknownToolCalls reaches the router's config as api.unknownToolCalls. The default
// (drop) writes nothing, so a deployment that never names it keeps the config it had (and its
// router pods) when the controller is upgraded; forward changes the config hash, so routers roll.
TEST(PlanDeployment, UnknownToolCallsReachTheRoutersConfig) {
  auto router_config = [](const DeploymentPlan& plan) {
    return json::parse(Child(plan, "ConfigMap", "tiny-cpu-config")["data"]["router.yaml"].get<std::string>());
  };
  auto hash = [](const DeploymentPlan& plan) {
    return Child(plan, "ConfigMap", "tiny-cpu-config")["metadata"]["annotations"]["tandem.dev/config-hash"];
  };
  json mdep = TinyCpu();
  StatusOr<DeploymentPlan> unset = PlanDeployment(mdep);
  ASSERT_TRUE(unset.ok()) << unset.status().ToString();
  EXPECT_FALSE(unset->spec.forward_unknown_tool_calls);
  EXPECT_FALSE(router_config(*unset).contains("api"));

  mdep["spec"]["router"]["unknownToolCalls"] = "drop";
  StatusOr<DeploymentPlan> drop = PlanDeployment(mdep);
  ASSERT_TRUE(drop.ok()) << drop.status().ToString();
  EXPECT_EQ(router_config(*drop), router_config(*unset));
  EXPECT_EQ(hash(*drop), hash(*unset));

  mdep["spec"]["router"]["unknownToolCalls"] = "forward";
  StatusOr<DeploymentPlan> forward = PlanDeployment(mdep);
  ASSERT_TRUE(forward.ok()) << forward.status().ToString();
  EXPECT_TRUE(forward->spec.forward_unknown_tool_calls);
  EXPECT_EQ(router_config(*forward)["api"], (json{{"unknownToolCalls", "forward"}}));
  EXPECT_NE(hash(*forward), hash(*unset));
  // Only the router: the pools' agents never build responses.
  for (const char* key : {"prefill.yaml", "decode.yaml"}) {
    EXPECT_FALSE(json::parse(Child(*forward, "ConfigMap", "tiny-cpu-config")["data"][key].get<std::string>())
                     .contains("api"))
        << key;
  }
}

// spec.tls: the Secret (tls.crt, tls.key, ca.crt) is mounted read-only in the router and in both
// pools' pods (through the ModelPools), never copied, and every agent config points at it.
TEST(PlanDeployment, TlsSecretReachesEveryAgentPodAndConfig) {
  json mdep = TinyCpu();
  mdep["spec"]["tls"] = {{"secretName", "agents-mtls"}};
  StatusOr<DeploymentPlan> plan = PlanDeployment(mdep);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  for (const DesiredObject& d : plan->children) EXPECT_NE(d.object["kind"], "Secret");
  const json tls_config = {{"certFile", "/etc/tandem-tls/tls.crt"},
                           {"keyFile", "/etc/tandem-tls/tls.key"},
                           {"caFile", "/etc/tandem-tls/ca.crt"},
                           {"serverName", "tandem-agent"}};
  const json& data = Child(*plan, "ConfigMap", "tiny-cpu-config")["data"];
  for (const char* key : {"prefill.yaml", "decode.yaml", "router.yaml"}) {
    EXPECT_EQ(json::parse(data[key].get<std::string>())["tls"], tls_config) << key;
  }
  auto expect_mounted = [](const json& pod_spec, const std::string& what) {
    bool volume = false, mount = false;
    for (const json& v : pod_spec["volumes"]) {
      volume = volume || (v["name"] == "tls" && v["secret"]["secretName"] == "agents-mtls");
    }
    for (const json& m : pod_spec["containers"][0]["volumeMounts"]) {
      mount = mount || (m["name"] == "tls" && m["mountPath"] == "/etc/tandem-tls" && m["readOnly"] == true);
    }
    EXPECT_TRUE(volume && mount) << what;
  };
  expect_mounted(Child(*plan, "Deployment", "tiny-cpu-router")["spec"]["template"]["spec"], "router");
  for (const char* role : {"prefill", "decode"}) {
    json pool = Child(*plan, "ModelPool", std::string("tiny-cpu-") + role);
    EXPECT_EQ(pool["spec"]["tls"], mdep["spec"]["tls"]);
    pool["metadata"]["uid"] = "uid-pool";
    StatusOr<PoolPlan> pool_plan = PlanPool(pool);
    ASSERT_TRUE(pool_plan.ok()) << pool_plan.status().ToString();
    EXPECT_EQ(pool_plan->spec.common.tls_secret, "agents-mtls");
    for (const DesiredObject& d : pool_plan->children) {
      if (d.object["kind"] == "StatefulSet") expect_mounted(d.object["spec"]["template"]["spec"], role);
    }
  }
  // Without spec.tls nothing is mounted and the configs have no tls block.
  StatusOr<DeploymentPlan> plain = PlanDeployment(TinyCpu());
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(
      json::parse(Child(*plain, "ConfigMap", "tiny-cpu-config")["data"]["decode.yaml"].get<std::string>())
          .contains("tls"));
  mdep["spec"]["tls"] = {{"serverName", "x"}};
  EXPECT_NE(PlanDeployment(mdep).status().message().find("spec.tls.secretName"), std::string::npos);
}

TEST(PlanDeployment, AutoscaledPoolReplicasAreSetOnlyAtCreation) {
  json mdep = TinyCpu();
  mdep["spec"]["decode"]["autoscaling"] = {{"enabled", true}, {"minReplicas", 1}, {"maxReplicas", 4}};
  StatusOr<DeploymentPlan> plan = PlanDeployment(mdep);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  for (const DesiredObject& d : plan->children) {
    bool autoscaled = d.object["metadata"]["name"] == "tiny-cpu-decode";
    EXPECT_EQ(d.create_only,
              autoscaled ? std::vector<std::string>{"/spec/replicas"} : std::vector<std::string>{});
  }
}

struct InvalidCase {
  const char* name;
  const char* patch;  // JSON merge patch applied to TinyCpu()
  const char* error;  // expected substring
};

class PlanDeploymentInvalid : public testing::TestWithParam<InvalidCase> {};

TEST_P(PlanDeploymentInvalid, IsRejectedWithTheField) {
  json mdep = TinyCpu();
  mdep.merge_patch(json::parse(GetParam().patch));
  StatusOr<DeploymentPlan> plan = PlanDeployment(mdep);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find(GetParam().error), std::string::npos) << plan.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Table, PlanDeploymentInvalid,
    testing::Values(
        InvalidCase{"NoUid", R"({"metadata": {"uid": null}})", "metadata.uid"},
        InvalidCase{"DottedName", R"({"metadata": {"name": "tiny.cpu"}})", "DNS-1035"},
        InvalidCase{"LeadingDigit", R"({"metadata": {"name": "7b"}})", "DNS-1035"},
        InvalidCase{"LongName", R"({"metadata": {"name": "a123456789012345678901234567890123456789012345"}})",
                    "longer than 44"},
        InvalidCase{"NoSpec", R"({"spec": null})", "spec: missing"},
        InvalidCase{"PathAndDummy", R"({"spec": {"model": {"path": "/models/x"}}})", "exactly one of path"},
        // Found by the cr_spec fuzzer: rendered into the agents' config, which refuses it, so the
        // pods would never start.
        InvalidCase{"NegativeDummySeed", R"({"spec": {"model": {"dummy": {"seed": -3}}}})",
                    "spec.model.dummy.seed: -3 is negative"},
        InvalidCase{"NeitherPathNorDummy", R"({"spec": {"model": {"dummy": null}}})", "exactly one of path"},
        InvalidCase{"PathOutsideVolume",
                    R"({"spec": {"model": {"dummy": null, "path": "/data/x",
                        "volume": {"hostPath": {"path": "/srv"}, "mountPath": "/models"}}}})",
                    "must lie under"},
        InvalidCase{"NoKind", R"({"kind": null})", "apiVersion and kind"},
        InvalidCase{"ClaimNameNotAString",
                    R"({"spec": {"model": {"dummy": null, "path": "/models/x",
                        "volume": {"persistentVolumeClaim": {"claimName": 7}, "mountPath": "/models"}}}})",
                    "claimName: want a string"},
        InvalidCase{"TensorParallelSix", R"({"spec": {"decode": {"tensorParallel": 6}}})",
                    "spec.decode.tensorParallel: 6"},
        InvalidCase{
            "GpusDisagree",
            R"({"spec": {"decode": {"tensorParallel": 8, "resources": {"limits": {"nvidia.com/gpu": 4}}}}})",
            "asks for 4 GPUs per pod but tensorParallel is 8"},
        InvalidCase{"GpuFraction",
                    R"({"spec": {"prefill": {"resources": {"limits": {"nvidia.com/gpu": "0.5"}}}}})",
                    "want a whole number"},
        InvalidCase{"UnknownWeights", R"({"spec": {"prefill": {"weights": "fp16"}}})",
                    "spec.prefill.weights"},
        InvalidCase{"UnknownKvCache", R"({"spec": {"decode": {"kvCache": "fp8"}}})", "spec.decode.kvCache"},
        InvalidCase{"RouterOnMetricsPort", R"({"spec": {"router": {"port": 9400}}})", "clashes"},
        InvalidCase{"BadKvMemory", R"({"spec": {"decode": {"kvCacheMemory": "lots"}}})",
                    "spec.decode.kvCacheMemory"},
        InvalidCase{"ReplicasNotANumber", R"({"spec": {"decode": {"replicas": "two"}}})",
                    "spec.decode.replicas: want an integer"},
        // Input the API server or the StatefulSet controller would refuse on every write: refused
        // once here, as an invalid spec, instead of retried.
        InvalidCase{"ReplicasPastInt32", R"({"spec": {"decode": {"replicas": 2147483648}}})",
                    "spec.decode.replicas: must be at most 2147483647"},
        InvalidCase{"RouterReplicasPastInt32", R"({"spec": {"router": {"replicas": 99999999999}}})",
                    "spec.router.replicas: must be at most 2147483647"},
        InvalidCase{"AutoscalingBoundsNotIntegers",
                    R"({"spec": {"decode": {"autoscaling": {"enabled": true, "maxReplicas": [4]}}}})",
                    "spec.decode.autoscaling.maxReplicas: want an integer"},
        InvalidCase{"AutoscalingMaxBelowMin",
                    R"({"spec": {"decode": {"autoscaling": {"minReplicas": 5, "maxReplicas": 2}}}})",
                    "spec.decode.autoscaling.maxReplicas: 2 is below minReplicas 5"},
        InvalidCase{"PullSecretWithoutName", R"({"spec": {"imagePullSecrets": [{"name": {}}]}})",
                    "spec.imagePullSecrets.0.name: want a Secret name"},
        InvalidCase{"MalformedCpu", R"({"spec": {"prefill": {"resources": {"requests": {"cpu": "lots"}}}}})",
                    "spec.prefill.resources.requests.cpu"},
        InvalidCase{"NegativeMemory",
                    R"({"spec": {"decode": {"resources": {"limits": {"memory": "-1Gi"}}}}})",
                    "spec.decode.resources.limits.memory"},
        InvalidCase{"UnknownToolCallsPolicy", R"({"spec": {"router": {"unknownToolCalls": "keep"}}})",
                    "spec.router.unknownToolCalls: 'keep' is not drop or forward"},
        InvalidCase{"UnknownToolCallsNotAString", R"({"spec": {"router": {"unknownToolCalls": true}}})",
                    "spec.router.unknownToolCalls"},
        InvalidCase{"RequestsNotAMap", R"({"spec": {"router": {"resources": {"requests": "big"}}}})",
                    "spec.router.resources.requests: want a map"}),
    [](const testing::TestParamInfo<InvalidCase>& info) { return std::string(info.param.name); });

TEST(ParseQuantityBytes, Suffixes) {
  EXPECT_EQ(*ParseQuantityBytes(json("40Gi")), 40LL << 30);
  EXPECT_EQ(*ParseQuantityBytes(json("512M")), 512'000'000);
  EXPECT_EQ(*ParseQuantityBytes(json("1.5Ki")), 1536);
  EXPECT_EQ(*ParseQuantityBytes(json(1024)), 1024);
  EXPECT_FALSE(ParseQuantityBytes(json("1.2.3")).ok());
  EXPECT_FALSE(ParseQuantityBytes(json("-1")).ok());
  EXPECT_FALSE(ParseQuantityBytes(json("9Ei")).ok());
  EXPECT_FALSE(ParseQuantityBytes(json(true)).ok());
  // Thousands of digits: an error value, not an exception out of the planner.
  StatusOr<int64_t> huge = ParseQuantityBytes(json("1" + std::string(5000, '0') + "Gi"));
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("too large"), std::string::npos);
  EXPECT_TRUE(ParseQuantityBytes(json("0." + std::string(5000, '0') + "1")).ok());  // tiny, not an error
  // The whole grammar (the fuzz target's finds): milli, exponents, a sign; rounded up as Kubernetes
  // does; a negative value is refused even when it underflows to zero, "-0" is zero.
  EXPECT_EQ(*ParseQuantityBytes(json("500m")), 1);
  EXPECT_EQ(*ParseQuantityBytes(json("4e10")), 40'000'000'000);
  EXPECT_EQ(*ParseQuantityBytes(json("+1.5E-3")), 1);
  EXPECT_FALSE(ParseQuantityBytes(json("-764E-7616")).ok());
  EXPECT_EQ(*ParseQuantityBytes(json("-0.0")), 0);
  EXPECT_FALSE(ParseQuantityBytes(json(18446744073709551615ull)).ok());
}

}  // namespace
}  // namespace tandem::controller::reconcile

namespace tandem::controller::reconcile {
namespace {

// Every JSON pointer of `node` (objects and arrays), depth-first.
void Pointers(const json& node, const std::string& prefix, std::vector<std::string>* out) {
  if (node.is_object()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      std::string token;  // RFC 6901: '~' is "~0" and '/' is "~1" (label keys have slashes)
      for (char c : it.key())
        token += c == '~' ? std::string("~0") : c == '/' ? std::string("~1") : std::string(1, c);
      out->push_back(prefix + "/" + token);
      Pointers(it.value(), prefix + "/" + token, out);
    }
  } else if (node.is_array()) {
    for (size_t i = 0; i < node.size(); ++i) {
      out->push_back(prefix + "/" + std::to_string(i));
      Pointers(node[i], prefix + "/" + std::to_string(i), out);
    }
  }
}

// Bad input from the cluster is an error value, never an exception: every field of a full
// ModelDeployment (and of the ModelPools planned from it) replaced by each JSON type in turn.
// A refusal is an InvalidArgument that names the damaged field (or an object holding it), and a
// scalar of the spec turned into an array or an object is always refused.
TEST(PlanDeployment, DamagedObjectsAreRefusedNamingTheField) {
  json mdep = TinyCpu();
  mdep["spec"]["model"] = {
      {"name", "m"},
      {"path", "/models/m"},
      {"volume", {{"persistentVolumeClaim", {{"claimName", "w"}}}, {"mountPath", "/models"}}}};
  mdep["spec"]["router"]["auth"] = {{"apiKeySecret", {{"name", "k"}}}};
  mdep["spec"]["decode"]["autoscaling"] = {{"enabled", true}, {"minReplicas", 1}, {"maxReplicas", 3}};
  mdep["spec"]["decode"]["kvCacheMemory"] = "1Gi";
  mdep["spec"]["imagePullSecrets"] = json::array({{{"name", "r"}}});
  StatusOr<DeploymentPlan> plan = PlanDeployment(mdep);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  std::vector<json> subjects = {mdep};
  for (const DesiredObject& d : plan->children) {
    if (d.object["kind"] != "ModelPool") continue;
    json pool = d.object;
    pool["metadata"]["uid"] = "p";
    subjects.push_back(pool);
  }
  const json kReplacements[] = {nullptr, 7, -1, 2.5, "x", true, json::array({1}), json::object()};
  int planned = 0, refused = 0;
  for (const json& subject : subjects) {
    const bool is_pool = subject.value("kind", json()) == "ModelPool";
    std::vector<std::string> pointers;
    Pointers(subject, "", &pointers);
    for (const std::string& p : pointers) {
      const json original = subject[json::json_pointer(p)];
      for (const json& value : kReplacements) {
        json damaged = subject;
        damaged[json::json_pointer(p)] = value;
        Status result;
        EXPECT_NO_THROW(result = is_pool ? PlanPool(damaged).status() : PlanDeployment(damaged).status())
            << p << " = " << value.dump();
        const std::string where = p + " = " + value.dump() + ": " + result.ToString();
        if (result.ok()) {
          ++planned;
          // (A string that became a number, or 7 where an integer was, may be a valid value:
          // the CRD's schema, held to an OpenAPI oracle in kube-sim's tests, refuses those.)
          const bool spec_scalar =
              p.rfind("/spec/", 0) == 0 && original.is_primitive() && !original.is_null();
          EXPECT_FALSE(spec_scalar && value.is_structured()) << "planned around " << where;
          continue;
        }
        ++refused;
        EXPECT_EQ(result.code(), StatusCode::kInvalidArgument) << where;
        bool named = false;
        for (std::string q = p; !q.empty() && !named; q = q.substr(0, q.rfind('/'))) {
          named = result.message().find(FieldPath(q)) != std::string::npos;
        }
        EXPECT_TRUE(named) << "the error does not name the field: " << where;
      }
    }
  }
  EXPECT_GT(planned, 0);  // some damage (e.g. to labels) is harmless
  EXPECT_GT(refused, planned / 4);
}

// Status reads a pool's desired replicas from its typed spec: the live pool's (moved by the
// autoscaler) once it exists and reads, else the deployment's.
TEST(PlanDeployment, DesiredReplicasComeFromTheTypedPoolSpec) {
  StatusOr<DeploymentPlan> plan = PlanDeployment(TinyCpu());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  json pool;
  for (const DesiredObject& d : plan->children) {
    if (d.object["kind"] == "ModelPool") pool = d.object;
  }
  ASSERT_TRUE(pool.is_object());
  pool["metadata"]["uid"] = "p";
  pool["spec"]["replicas"] = 3;
  EXPECT_EQ(DesiredReplicas(&pool, 1), 3);
  EXPECT_EQ(DesiredReplicas(nullptr, 2), 2);
  pool["spec"]["replicas"] = "three";  // unreadable: the deployment's figure stands
  EXPECT_EQ(DesiredReplicas(&pool, 2), 2);
}

}  // namespace
}  // namespace tandem::controller::reconcile
