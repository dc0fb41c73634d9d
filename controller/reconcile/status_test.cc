// Conditions, ModelPool status and ModelDeployment status (pure functions).
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "controller/reconcile/conditions.h"
#include "controller/reconcile/deployment_status.h"
#include "controller/reconcile/pool_status.h"

namespace tandem::controller::reconcile {
namespace {

constexpr const char* kT0 = "2026-12-01T00:00:00Z";
constexpr const char* kT1 = "2026-12-01T00:05:00Z";

std::string Cond(const json& status, std::string_view type, const char* field) {
  const json* c = FindCondition(status, type);
  return c == nullptr ? "<none>" : c->at(field).get<std::string>();
}

TEST(MergeConditions, TransitionTimeMovesOnlyWhenStatusFlips) {
  json first = MergeConditions(nullptr, {{"Ready", false, "PodsNotReady", "0/1"}}, 1, kT0);
  json holder = {{"conditions", first}};
  EXPECT_EQ(Cond(holder, "Ready", "lastTransitionTime"), kT0);
  // Same status, new message and generation: time kept.
  json same = MergeConditions(first, {{"Ready", false, "InsufficientCapacity", "no nodes"}}, 2, kT1);
  EXPECT_EQ(same[0]["lastTransitionTime"], kT0);
  EXPECT_EQ(same[0]["reason"], "InsufficientCapacity");
  EXPECT_EQ(same[0]["observedGeneration"], 2);
  // Flip: time moves.
  json flipped = MergeConditions(same, {{"Ready", true, "AllReplicasReady", "1/1"}}, 2, kT1);
  EXPECT_EQ(flipped[0]["lastTransitionTime"], kT1);
  EXPECT_EQ(flipped[0]["status"], "True");
  // Recomputing from unchanged facts at a later time is byte-identical (no status write).
  EXPECT_EQ(MergeConditions(flipped, {{"Ready", true, "AllReplicasReady", "1/1"}}, 2, "2027-01-01T00:00:00Z"),
            flipped);
  EXPECT_EQ(Rfc3339(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(Rfc3339(1764551723), "2025-12-01T01:15:23Z");
}

json Pool(int replicas) {
  return json{{"metadata", {{"name", "d-decode"}, {"generation", 4}}},
              {"spec", {{"deploymentName", "d"}, {"role", "decode"}, {"replicas", replicas}}}};
}

json Sts(int spec_replicas, int replicas, int ready, int updated, bool observed = true) {
  return json{{"metadata", {{"generation", 2}}},
              {"spec", {{"replicas", spec_replicas}}},
              {"status",
               {{"observedGeneration", observed ? 2 : 1},
                {"replicas", replicas},
                {"readyReplicas", ready},
                {"updatedReplicas", updated},
                {"currentRevision", "r1"},
                {"updateRevision", "r1"}}}};
}

json UnschedulablePod() {
  return json::parse(
      R"({"status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
      "reason": "Unschedulable", "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}]}})");
}

struct PoolCase {
  const char* name;
  json sts;  // null: no StatefulSet yet
  int unschedulable_pods;
  bool invalid;
  bool not_owned;
  const char* ready;  // "True/Reason"
  const char* progressing;
  const char* degraded;
};

class PoolStatusTable : public testing::TestWithParam<PoolCase> {};

TEST_P(PoolStatusTable, Conditions) {
  const PoolCase& c = GetParam();
  json pool = Pool(2);
  PoolObservation o;
  o.pool = &pool;
  o.desired = 2;
  if (c.invalid) o.plan = Status::InvalidArgument("spec.tensorParallel: 6 is not a power of two");
  if (c.not_owned) o.not_owned.push_back("StatefulSet ns/d-decode");
  if (!c.sts.is_null()) o.statefulset = &c.sts;
  std::vector<json> pods(c.unschedulable_pods, UnschedulablePod());
  for (const json& p : pods) o.pods.push_back(&p);
  json status = ComputePoolStatus(o, kT0);
  auto both = [&](std::string_view type) {
    return Cond(status, type, "status") + "/" + Cond(status, type, "reason");
  };
  EXPECT_EQ(both(kReady), c.ready);
  EXPECT_EQ(both(kProgressing), c.progressing);
  EXPECT_EQ(both(kDegraded), c.degraded);
  EXPECT_EQ(status["observedGeneration"], 4);
  EXPECT_EQ(status["selector"], "tandem.dev/deployment=d,tandem.dev/pool=decode");
}

INSTANTIATE_TEST_SUITE_P(
    Table, PoolStatusTable,
    testing::Values(PoolCase{"NoStatefulSet", nullptr, 0, false, false, "False/PodsNotReady",
                             "True/RolloutInProgress", "False/AsExpected"},
                    PoolCase{"Starting", Sts(2, 2, 1, 2), 0, false, false, "False/PodsNotReady",
                             "False/RolloutComplete", "False/AsExpected"},
                    PoolCase{"AllReady", Sts(2, 2, 2, 2), 0, false, false, "True/AllReplicasReady",
                             "False/RolloutComplete", "False/AsExpected"},
                    PoolCase{"StatefulSetNotObserved", Sts(2, 2, 2, 2, false), 0, false, false,
                             "False/PodsNotReady", "True/RolloutInProgress", "False/AsExpected"},
                    PoolCase{"ScalingUp", Sts(1, 1, 1, 1), 0, false, false, "False/PodsNotReady",
                             "True/RolloutInProgress", "False/AsExpected"},
                    PoolCase{"Updating", Sts(2, 2, 2, 1), 0, false, false, "False/PodsNotReady",
                             "True/RolloutInProgress", "False/AsExpected"},
                    PoolCase{"NoCapacity", Sts(2, 2, 1, 2), 1, false, false, "False/InsufficientCapacity",
                             "False/RolloutComplete", "True/InsufficientCapacity"},
                    PoolCase{"InvalidSpec", Sts(2, 2, 2, 2), 0, true, false, "False/InvalidSpec",
                             "False/InvalidSpec", "True/InvalidSpec"},
                    PoolCase{"NotOwned", nullptr, 0, false, true, "False/PodsNotReady",
                             "True/RolloutInProgress", "True/ResourceNotOwned"}),
    [](const testing::TestParamInfo<PoolCase>& info) { return std::string(info.param.name); });

TEST(PoolStatus, ReplicaCountsComeFromTheStatefulSet) {
  json pool = Pool(3);
  json sts = Sts(3, 3, 2, 3);
  PoolObservation o;
  o.pool = &pool;
  o.desired = 3;
  o.statefulset = &sts;
  json status = ComputePoolStatus(o, kT0);
  EXPECT_EQ(status["replicas"], 3);
  EXPECT_EQ(status["readyReplicas"], 2);
  EXPECT_EQ(Cond(status, kReady, "message"), "2/3 replicas ready");
}

json ReadyPool(int desired, int ready, bool ready_condition, bool current = true,
               const char* degraded = nullptr) {
  json conditions = json::array({json{{"type", "Ready"}, {"status", ready_condition ? "True" : "False"}}});
  if (degraded != nullptr) {
    conditions.push_back({{"type", "Degraded"}, {"status", "True"}, {"reason", degraded}, {"message", "m"}});
  }
  return json{{"metadata", {{"generation", 5}}},
              {"spec", {{"replicas", desired}}},
              {"status",
               {{"observedGeneration", current ? 5 : 4},
                {"replicas", desired},
                {"readyReplicas", ready},
                {"conditions", conditions}}}};
}

json Router(int replicas, int ready) {
  return json{{"metadata", {{"generation", 1}}},
              {"spec", {{"replicas", replicas}}},
              {"status", {{"observedGeneration", 1}, {"replicas", replicas}, {"readyReplicas", ready}}}};
}

json Mdep() {
  return json::parse(R"({"metadata": {"name": "d", "generation": 7},
      "spec": {"prefill": {"replicas": 1}, "decode": {"replicas": 2}, "router": {"replicas": 1}}})");
}

// The desired replicas of Mdep()'s spec, as the reconciler fills them in.
void DesiredOfMdep(DeploymentObservation* o) {
  o->prefill_desired = 1;
  o->decode_desired = 2;
  o->router_desired = 1;
}

TEST(DeploymentStatus, ReadyWhenEveryPoolAndTheRouterAre) {
  json mdep = Mdep(), prefill = ReadyPool(1, 1, true), decode = ReadyPool(2, 2, true), router = Router(1, 1);
  DeploymentObservation o{&mdep,   Status::Ok(), "prefill=fp8/bf16 decode=int4/fp8_e4m3", {}, &prefill,
                          &decode, &router};
  DesiredOfMdep(&o);
  json status = ComputeDeploymentStatus(o, kT0);
  EXPECT_EQ(Cond(status, kReady, "status"), "True");
  EXPECT_EQ(Cond(status, kReady, "reason"), "AllPoolsReady");
  EXPECT_EQ(Cond(status, kProgressing, "status"), "False");
  EXPECT_EQ(Cond(status, kDegraded, "status"), "False");
  EXPECT_EQ(status["observedGeneration"], 7);
  EXPECT_EQ(status["decode"], json::parse(R"({"replicas": 2, "readyReplicas": 2, "ready": "2/2"})"));
  EXPECT_EQ(status["precision"], "prefill=fp8/bf16 decode=int4/fp8_e4m3");

  // A pool whose status is for an older generation is still rolling out.
  json stale = ReadyPool(2, 2, true, /*current=*/false);
  o.decode = &stale;
  status = ComputeDeploymentStatus(o, kT1);
  EXPECT_EQ(Cond(status, kReady, "status") + "/" + Cond(status, kReady, "reason"), "False/PodsNotReady");
  EXPECT_EQ(Cond(status, kProgressing, "reason"), "RolloutInProgress");
  EXPECT_EQ(Cond(status, kReady, "lastTransitionTime"), kT1);

  // Missing pools (just created) and a router not ready.
  json slow_router = Router(1, 0);
  DeploymentObservation fresh{&mdep, Status::Ok(), "", {}, nullptr, nullptr, &slow_router};
  DesiredOfMdep(&fresh);
  status = ComputeDeploymentStatus(fresh, kT0);
  EXPECT_EQ(Cond(status, kReady, "message"), "not ready: prefill 0/1, decode 0/2, router 0/1");
}

TEST(DeploymentStatus, PoolCapacityAndInvalidSpecAndNotOwned) {
  json mdep = Mdep(), prefill = ReadyPool(1, 1, true), router = Router(1, 1);
  json starved = ReadyPool(2, 1, false, true, "InsufficientCapacity");
  DeploymentObservation o{&mdep, Status::Ok(), "", {}, &prefill, &starved, &router};
  DesiredOfMdep(&o);
  json status = ComputeDeploymentStatus(o, kT0);
  EXPECT_EQ(Cond(status, kReady, "reason"), "InsufficientCapacity");
  EXPECT_EQ(Cond(status, kDegraded, "status") + "/" + Cond(status, kDegraded, "reason"),
            "True/InsufficientCapacity");

  o.not_owned = {"Service ns/d"};
  status = ComputeDeploymentStatus(o, kT0);
  EXPECT_EQ(Cond(status, kDegraded, "reason"), "ResourceNotOwned");
  EXPECT_NE(Cond(status, kDegraded, "message").find("Service ns/d"), std::string::npos);

  DeploymentObservation invalid{
      &mdep, Status::InvalidArgument("spec.model: set exactly one"), "", {}, nullptr, nullptr, nullptr};
  status = ComputeDeploymentStatus(invalid, kT0);
  for (std::string_view type : {kReady, kProgressing, kDegraded})
    EXPECT_EQ(Cond(status, type, "reason"), "InvalidSpec");
  EXPECT_EQ(Cond(status, kDegraded, "message"), "spec.model: set exactly one");
}

}  // namespace
}  // namespace tandem::controller::reconcile

namespace tandem::controller::reconcile {
namespace {

void Pointers(const json& node, const std::string& prefix, std::vector<std::string>* out) {
  if (!node.is_object() && !node.is_array()) return;
  if (node.is_object()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      out->push_back(prefix + "/" + it.key());
      Pointers(it.value(), prefix + "/" + it.key(), out);
    }
    return;
  }
  for (size_t i = 0; i < node.size(); ++i) {
    out->push_back(prefix + "/" + std::to_string(i));
    Pointers(node[i], prefix + "/" + std::to_string(i), out);
  }
}

// Every condition of a computed status is well formed: a type, True/False/Unknown, a reason and
// a transition time. Returns the Ready condition's status ("" when there is none).
std::string ExpectWellFormed(const json& status, const std::string& where) {
  std::string ready;
  EXPECT_TRUE(status.is_object() && status.contains("conditions") && status["conditions"].is_array())
      << where;
  if (!status.is_object() || !status.contains("conditions") || !status["conditions"].is_array()) return ready;
  for (const json& c : status["conditions"]) {
    const std::string s = c.value("status", "");
    EXPECT_TRUE(s == "True" || s == "False" || s == "Unknown") << where << ": " << c.dump();
    EXPECT_FALSE(c.value("type", "").empty()) << where << ": " << c.dump();
    EXPECT_FALSE(c.value("reason", "").empty()) << where << ": " << c.dump();
    EXPECT_TRUE(c.contains("lastTransitionTime") && c["lastTransitionTime"].is_string()) << where;
    if (c.value("type", "") == kReady) ready = s;
  }
  EXPECT_FALSE(ready.empty()) << where << ": no Ready condition";
  return ready;
}

// Status computation reads objects other controllers (and users) write: every field of each
// input replaced by each JSON type gives a well-formed status, never an exception. The inputs
// describe a pool with 1 of 2 replicas ready and a deployment whose decode pool is not Ready, so
// damage that is not a plausible value (anything but an integer) never makes either Ready.
TEST(Status, DamagedInputsGiveWellFormedStatusAndNeverReady) {
  const json kReplacements[] = {nullptr, 7, "x", true, json::array({1}), json::object()};
  json pool = Pool(2), sts = Sts(2, 2, 1, 2), pod = UnschedulablePod();
  pool["status"] = ReadyPool(2, 1, false, true, "InsufficientCapacity")["status"];
  json mdep = Mdep(), prefill = ReadyPool(1, 1, true),
       decode = ReadyPool(2, 1, false, true, "InsufficientCapacity");
  json router = Router(1, 1);
  mdep["status"] = {
      {"conditions", MergeConditions(nullptr, {{"Ready", true, "AllPoolsReady", "m"}}, 1, kT0)}};
  auto compute = [&](const std::string& where, json* pool_status, json* deployment_status) {
    PoolObservation o;
    o.pool = &pool;
    o.desired = 2;  // what PlanPool read (damage to the pool's spec is the planner's to refuse)
    o.statefulset = &sts;
    o.pods = {&pod};
    *pool_status = ComputePoolStatus(o, kT1);
    DeploymentObservation d{&mdep, Status::Ok(), "", {}, &prefill, &decode, &router};
    DesiredOfMdep(&d);
    *deployment_status = ComputeDeploymentStatus(d, kT1);
    (void)where;
  };
  json pool_status, deployment_status;
  compute("undamaged", &pool_status, &deployment_status);
  ASSERT_EQ(ExpectWellFormed(pool_status, "undamaged pool"), "False");
  ASSERT_EQ(ExpectWellFormed(deployment_status, "undamaged deployment"), "False");

  json* inputs[] = {&pool, &sts, &pod, &mdep, &prefill, &decode, &router};
  const char* names[] = {"pool", "statefulset", "pod", "deployment", "prefill", "decode", "router"};
  int computed = 0;
  for (size_t i = 0; i < std::size(inputs); ++i) {
    json* input = inputs[i];
    std::vector<std::string> pointers;
    Pointers(*input, "", &pointers);
    json original = *input;
    for (const std::string& p : pointers) {
      for (const json& value : kReplacements) {
        *input = original;
        (*input)[json::json_pointer(p)] = value;
        const std::string where = std::string(names[i]) + p + " = " + value.dump();
        EXPECT_NO_THROW(compute(where, &pool_status, &deployment_status)) << where;
        const std::string pool_ready = ExpectWellFormed(pool_status, where + " (pool)");
        const std::string deployment_ready = ExpectWellFormed(deployment_status, where + " (deployment)");
        if (!value.is_number_integer()) {
          EXPECT_NE(pool_ready, "True") << where << ": " << pool_status.dump();
          EXPECT_NE(deployment_ready, "True") << where << ": " << deployment_status.dump();
        }
        ++computed;
      }
      *input = original;
    }
  }
  EXPECT_GT(computed, 100);
}

}  // namespace
}  // namespace tandem::controller::reconcile
