#include "controller/reconcile/apply.h"

#include <gtest/gtest.h>

#include "controller/reconcile/deployment_plan.h"
#include "controller/reconcile/memory_store.h"
#include "controller/reconcile/pool_plan.h"

namespace tandem::controller::reconcile {
namespace {

json Mdep() {
  return json::parse(R"({
    "apiVersion": "tandem.dev/v1alpha1", "kind": "ModelDeployment",
    "metadata": {"name": "tiny", "namespace": "ns", "uid": "owner-uid", "generation": 1},
    "spec": {"model": {"name": "t", "dummy": {"preset": "tiny", "seed": 1}},
             "prefill": {"replicas": 1}, "decode": {"replicas": 1}}})");
}

PruneScope Scope() {
  return PruneScope{"ns",
                    json{{"tandem.dev/deployment", "tiny"}},
                    {Kind::kModelPool, Kind::kConfigMap, Kind::kDeployment, Kind::kService}};
}

std::vector<DesiredObject> Plan(const json& mdep) {
  StatusOr<DeploymentPlan> plan = PlanDeployment(mdep);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return plan.ok() ? plan->children : std::vector<DesiredObject>{};
}

TEST(ApplyChildren, SecondPassOverUnchangedObjectsMakesZeroWrites) {
  MemoryStore store;
  json mdep = Mdep();
  StatusOr<ApplyResult> first = ApplyChildren(store, "owner-uid", Plan(mdep), Scope());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->created, 5);
  EXPECT_EQ(store.writes(), 5);
  for (int pass = 0; pass < 3; ++pass) {
    StatusOr<ApplyResult> again = ApplyChildren(store, "owner-uid", Plan(mdep), Scope());
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(again->writes(), 0);
    EXPECT_EQ(again->unchanged, 5);
  }
  EXPECT_EQ(store.writes(), 5);
  // The same holds for a pool's children.
  json pool = *store.Get(Kind::kModelPool, "ns", "tiny-decode");
  StatusOr<PoolPlan> pool_plan = PlanPool(pool);
  ASSERT_TRUE(pool_plan.ok()) << pool_plan.status().ToString();
  PruneScope pool_scope{
      "ns", json::object(), {Kind::kStatefulSet, Kind::kService, Kind::kPodDisruptionBudget}};
  std::string uid = pool["metadata"]["uid"];
  ASSERT_EQ(ApplyChildren(store, uid, pool_plan->children, pool_scope)->created, 3);
  EXPECT_EQ(ApplyChildren(store, uid, pool_plan->children, pool_scope)->writes(), 0);
}

TEST(ApplyChildren, ChangedSpecUpdatesOnlyTheObjectsThatDiffer) {
  MemoryStore store;
  json mdep = Mdep();
  ASSERT_TRUE(ApplyChildren(store, "owner-uid", Plan(mdep), Scope()).ok());
  int before = store.writes();
  mdep["spec"]["decode"]["replicas"] = 3;  // the decode pool only; configs do not change
  StatusOr<ApplyResult> r = ApplyChildren(store, "owner-uid", Plan(mdep), Scope());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->updated, 1);
  EXPECT_EQ(store.writes(), before + 1);
  json decode = *store.Get(Kind::kModelPool, "ns", "tiny-decode");
  EXPECT_EQ(decode["spec"]["replicas"], 3);
  EXPECT_EQ(decode["metadata"]["generation"], 2);
}

TEST(ApplyChildren, RevertsOthersChangesAndRemovesFieldsWeNoLongerSet) {
  MemoryStore store;
  json mdep = Mdep();
  mdep["spec"]["decode"]["nodeSelector"] = {{"pool", "a"}};
  ASSERT_TRUE(ApplyChildren(store, "owner-uid", Plan(mdep), Scope()).ok());
  // Someone edits a managed field: the next pass puts it back.
  (*store.Mutable(Kind::kModelPool, "ns", "tiny-decode"))["spec"]["weights"] = "fp8";
  // Someone adds their own label: kept.
  (*store.Mutable(Kind::kModelPool, "ns", "tiny-decode"))["metadata"]["labels"]["team"] = "x";
  ASSERT_EQ(ApplyChildren(store, "owner-uid", Plan(mdep), Scope())->updated, 1);
  json decode = *store.Get(Kind::kModelPool, "ns", "tiny-decode");
  EXPECT_EQ(decode["spec"]["weights"], "bf16");
  EXPECT_EQ(decode["metadata"]["labels"]["team"], "x");
  // We stop setting nodeSelector: it goes away.
  mdep["spec"]["decode"].erase("nodeSelector");
  ASSERT_EQ(ApplyChildren(store, "owner-uid", Plan(mdep), Scope())->updated, 1);
  EXPECT_FALSE(store.Get(Kind::kModelPool, "ns", "tiny-decode")->at("spec").contains("nodeSelector"));
  EXPECT_EQ(ApplyChildren(store, "owner-uid", Plan(mdep), Scope())->writes(), 0);
}

TEST(ApplyChildren, CreateOnlyFieldsAreLeftToTheirNewOwner) {
  MemoryStore store;
  json mdep = Mdep();
  mdep["spec"]["decode"]["autoscaling"] = {{"enabled", true}, {"minReplicas", 1}, {"maxReplicas", 8}};
  ASSERT_TRUE(ApplyChildren(store, "owner-uid", Plan(mdep), Scope()).ok());
  EXPECT_EQ(store.Get(Kind::kModelPool, "ns", "tiny-decode")->at("spec")["replicas"], 1);
  (*store.Mutable(Kind::kModelPool, "ns", "tiny-decode"))["spec"]["replicas"] = 6;  // the autoscaler
  EXPECT_EQ(ApplyChildren(store, "owner-uid", Plan(mdep), Scope())->writes(), 0);
  mdep["spec"]["decode"]["weights"] = "int4";  // an update for another reason keeps the autoscaler's 6
  ASSERT_EQ(ApplyChildren(store, "owner-uid", Plan(mdep), Scope())->updated,
            2);  // the pool and the ConfigMap
  EXPECT_EQ(store.Get(Kind::kModelPool, "ns", "tiny-decode")->at("spec")["replicas"], 6);
}

TEST(ApplyChildren, RefusesToAdoptObjectsItDoesNotOwn) {
  MemoryStore store;
  json foreign = {{"apiVersion", "v1"},
                  {"kind", "Service"},
                  {"metadata", {{"name", "tiny"}, {"namespace", "ns"}, {"labels", {{"app", "theirs"}}}}},
                  {"spec", {{"type", "NodePort"}}}};
  store.Seed(Kind::kService, foreign);
  StatusOr<ApplyResult> r = ApplyChildren(store, "owner-uid", Plan(Mdep()), Scope());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->not_owned, std::vector<std::string>{"Service ns/tiny"});
  EXPECT_EQ(r->created, 4);
  EXPECT_EQ(store.Get(Kind::kService, "ns", "tiny")->at("spec")["type"], "NodePort");  // untouched
}

TEST(ApplyChildren, PrunesOwnedChildrenNoLongerDesiredOnly) {
  MemoryStore store;
  json mdep = Mdep();
  ASSERT_TRUE(ApplyChildren(store, "owner-uid", Plan(mdep), Scope()).ok());
  json labels = {{"tandem.dev/deployment", "tiny"}};
  json owner_ref = {{"apiVersion", "tandem.dev/v1alpha1"},
                    {"kind", "ModelDeployment"},
                    {"name", "tiny"},
                    {"uid", "owner-uid"},
                    {"controller", true}};
  store.Seed(Kind::kConfigMap, {{"apiVersion", "v1"},
                                {"kind", "ConfigMap"},
                                {"metadata",
                                 {{"name", "tiny-old"},
                                  {"namespace", "ns"},
                                  {"labels", labels},
                                  {"ownerReferences", json::array({owner_ref})}}}});
  owner_ref["uid"] = "another-owner";
  store.Seed(Kind::kConfigMap, {{"apiVersion", "v1"},
                                {"kind", "ConfigMap"},
                                {"metadata",
                                 {{"name", "tiny-theirs"},
                                  {"namespace", "ns"},
                                  {"labels", labels},
                                  {"ownerReferences", json::array({owner_ref})}}}});
  StatusOr<ApplyResult> r = ApplyChildren(store, "owner-uid", Plan(mdep), Scope());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->deleted, 1);
  EXPECT_FALSE(store.Get(Kind::kConfigMap, "ns", "tiny-old").ok());
  EXPECT_TRUE(store.Get(Kind::kConfigMap, "ns", "tiny-theirs").ok());
  EXPECT_TRUE(store.Get(Kind::kConfigMap, "ns", "tiny-config").ok());
}

TEST(ApplyChildren, ConflictIsReturnedForARetry) {
  MemoryStore store;
  json mdep = Mdep();
  ASSERT_TRUE(ApplyChildren(store, "owner-uid", Plan(mdep), Scope()).ok());
  mdep["spec"]["prefill"]["replicas"] = 2;
  store.fail_next_updates = 1;
  StatusOr<ApplyResult> r = ApplyChildren(store, "owner-uid", Plan(mdep), Scope());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kAborted);
  EXPECT_NE(r.status().message().find("updating ModelPool ns/tiny-prefill"), std::string::npos);
  ASSERT_EQ(ApplyChildren(store, "owner-uid", Plan(mdep), Scope())->updated, 1);
}

TEST(Contains, SubsetSemantics) {
  EXPECT_TRUE(Contains(json::parse(R"({"a": 1, "b": {"c": 2, "d": 3}})"), json::parse(R"({"b": {"c": 2}})")));
  EXPECT_FALSE(Contains(json::parse(R"({"a": [1, 2]})"), json::parse(R"({"a": [1]})")));
  EXPECT_TRUE(Contains(json::parse(R"({"a": [{"x": 1, "y": 2}]})"), json::parse(R"({"a": [{"x": 1}]})")));
  EXPECT_TRUE(Contains(json(2.0), json(2)));
  EXPECT_FALSE(Contains(json("2"), json(2)));
  EXPECT_FALSE(Contains(json::parse(R"({"a": null})"), json::parse(R"({"a": 1})")));
}

}  // namespace
}  // namespace tandem::controller::reconcile
