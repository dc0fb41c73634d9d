#include "controller/reconcile/reconciler.h"

#include <gtest/gtest.h>

#include "controller/reconcile/conditions.h"
#include "controller/reconcile/memory_store.h"

namespace tandem::controller::reconcile {
namespace {

std::string Cond(const json& object, std::string_view type) {
  json status = object.value("status", json::object());
  const json* c = FindCondition(status, type);
  return c == nullptr ? "<none>"
                      : c->at("status").get<std::string>() + "/" + c->at("reason").get<std::string>();
}

class ReconcilerTest : public testing::Test {
 protected:
  ReconcilerTest()
      : events_(&store_, "tandem-controller", [this] { return now_; }),
        deployments_(Context()),
        pools_(Context()) {}

  ReconcileContext Context() {
    ReconcileContext ctx;
    ctx.store = &store_;
    ctx.events = &events_;
    ctx.unix_seconds = [this] { return now_; };
    return ctx;
  }

  void SeedDeployment() {
    store_.Seed(Kind::kModelDeployment, json::parse(R"({
      "apiVersion": "tandem.dev/v1alpha1", "kind": "ModelDeployment",
      "metadata": {"name": "tiny", "namespace": "ns", "uid": "mdep-uid", "generation": 1},
      "spec": {"model": {"name": "t", "dummy": {"preset": "tiny", "seed": 1}},
               "router": {"replicas": 1}, "prefill": {"replicas": 1}, "decode": {"replicas": 1}}})"));
  }

  // One pass of both controllers over everything, as the work queues would do after events.
  void ReconcileAll() {
    ASSERT_TRUE(deployments_.Reconcile("ns/tiny").ok());
    ASSERT_TRUE(pools_.Reconcile("ns/tiny-prefill").ok());
    ASSERT_TRUE(pools_.Reconcile("ns/tiny-decode").ok());
    ASSERT_TRUE(deployments_.Reconcile("ns/tiny").ok());
  }

  // What kube-sim's controllers do once the pods are up.
  void MarkEverythingReady() {
    for (const char* pool : {"tiny-prefill", "tiny-decode"}) {
      json* sts = store_.Mutable(Kind::kStatefulSet, "ns", pool);
      ASSERT_NE(sts, nullptr);
      (*sts)["status"] = {{"observedGeneration", (*sts)["metadata"]["generation"]},
                          {"replicas", 1},
                          {"readyReplicas", 1},
                          {"updatedReplicas", 1}};
    }
    json* router = store_.Mutable(Kind::kDeployment, "ns", "tiny-router");
    ASSERT_NE(router, nullptr);
    (*router)["status"] = {{"observedGeneration", 1}, {"replicas", 1}, {"readyReplicas", 1}};
  }

  json Deployment() { return *store_.Get(Kind::kModelDeployment, "ns", "tiny"); }

  int64_t now_ = 1'764'550'800;  // 2025-12-01T01:00:00Z
  MemoryStore store_;
  EventRecorder events_;
  ModelDeploymentReconciler deployments_;
  ModelPoolReconciler pools_;
};

TEST_F(ReconcilerTest, ConvergesToReadyThenMakesNoWrites) {
  SeedDeployment();
  ReconcileAll();
  json mdep = Deployment();
  EXPECT_EQ(mdep["metadata"]["finalizers"], json::array({"tandem.dev/cleanup"}));
  EXPECT_EQ(mdep["status"]["observedGeneration"], 1);
  EXPECT_EQ(Cond(mdep, "Ready"), "False/PodsNotReady");
  EXPECT_TRUE(store_.Get(Kind::kStatefulSet, "ns", "tiny-decode").ok());
  EXPECT_TRUE(store_.Get(Kind::kPodDisruptionBudget, "ns", "tiny-prefill").ok());

  MarkEverythingReady();
  now_ += 60;
  ReconcileAll();
  mdep = Deployment();
  EXPECT_EQ(Cond(mdep, "Ready"), "True/AllPoolsReady");
  EXPECT_EQ(Cond(mdep, "Progressing"), "False/RolloutComplete");
  EXPECT_EQ(Cond(mdep, "Degraded"), "False/AsExpected");
  EXPECT_EQ(mdep["status"]["decode"]["ready"], "1/1");
  EXPECT_EQ(mdep["status"]["precision"], "prefill=bf16/bf16 decode=bf16/bf16");
  EXPECT_EQ(FindCondition(mdep["status"], "Ready")->at("lastTransitionTime"), "2025-12-01T01:01:00Z");

  // Steady state: nothing to write, however often it runs.
  int writes = store_.writes();
  now_ += 3600;
  ReconcileAll();
  ReconcileAll();
  EXPECT_EQ(store_.writes(), writes);
}

TEST_F(ReconcilerTest, InvalidSpecTouchesNoChildren) {
  SeedDeployment();
  ReconcileAll();
  json* mdep = store_.Mutable(Kind::kModelDeployment, "ns", "tiny");
  (*mdep)["spec"]["decode"]["tensorParallel"] = 4;
  (*mdep)["spec"]["decode"]["resources"] = {{"limits", {{"nvidia.com/gpu", 2}}}};
  (*mdep)["metadata"]["generation"] = 2;
  int updates = store_.updates, creates = store_.creates;
  ASSERT_TRUE(deployments_.Reconcile("ns/tiny").ok());
  EXPECT_EQ(store_.updates, updates);
  EXPECT_EQ(store_.creates, creates + 1);  // the InvalidSpec event, no child
  json status = Deployment()["status"];
  EXPECT_EQ(status["observedGeneration"], 2);
  EXPECT_EQ(Cond(Deployment(), "Ready"), "False/InvalidSpec");
  EXPECT_EQ(Cond(Deployment(), "Degraded"), "True/InvalidSpec");
  EXPECT_NE(FindCondition(status, "Degraded")->at("message").get<std::string>().find("tensorParallel is 4"),
            std::string::npos);
}

TEST_F(ReconcilerTest, DeletionRemovesTheFinalizer) {
  SeedDeployment();
  ReconcileAll();
  ASSERT_TRUE(store_.Delete(Kind::kModelDeployment, "ns", "tiny", "").ok());
  ASSERT_TRUE(store_.Get(Kind::kModelDeployment, "ns", "tiny").ok());  // held by the finalizer
  ASSERT_TRUE(deployments_.Reconcile("ns/tiny").ok());
  EXPECT_EQ(store_.Get(Kind::kModelDeployment, "ns", "tiny").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(deployments_.Reconcile("ns/tiny").ok());  // gone: nothing to do
}

TEST_F(ReconcilerTest, EventsAreRecordedForTransitionsAndAggregated) {
  SeedDeployment();
  ReconcileAll();
  MarkEverythingReady();
  ReconcileAll();
  int64_t recorded = events_.recorded();
  EXPECT_GE(recorded, 4);  // Created (deployment, two pools), Ready (pools, deployment)
  json mdep = Deployment();
  auto tests = [&] {
    std::vector<json> out;
    StatusOr<std::vector<json>> listed = store_.List(Kind::kEvent, "ns", json::object());
    if (!listed.ok()) return out;
    for (const json& e : *listed) {
      if (e.value("reason", "") == "Test") out.push_back(e);
    }
    return out;
  };
  events_.Record(mdep, kEventWarning, "Test", "same message");
  now_ += 5;
  events_.Record(mdep, kEventWarning, "Test", "same message");
  events_.Record(mdep, kEventWarning, "Test", "same message");
  // One object, counted three times, its lastTimestamp the latest occurrence.
  EXPECT_EQ(events_.recorded(), recorded + 1);
  EXPECT_EQ(events_.suppressed(), 2);
  std::vector<json> listed = tests();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0]["count"], 3);
  EXPECT_NE(listed[0]["firstTimestamp"], listed[0]["lastTimestamp"]);
  // A different message is its own event.
  events_.Record(mdep, kEventWarning, "Test", "other message");
  EXPECT_EQ(tests().size(), 2u);
  // Past the window a repeat is a new object again.
  now_ += 601;
  events_.Record(mdep, kEventWarning, "Test", "same message");
  EXPECT_EQ(events_.recorded(), recorded + 3);
  EXPECT_EQ(tests().size(), 3u);
  // The aggregated event deleted (expired, or by a user): the next repeat creates one.
  std::vector<json> all = tests();
  for (const json& e : all) {
    if (e["count"] == 1 && e["message"] == "same message") {
      ASSERT_TRUE(store_.Delete(Kind::kEvent, "ns", e["metadata"]["name"], "").ok());
    }
  }
  events_.Record(mdep, kEventWarning, "Test", "same message");
  EXPECT_EQ(events_.recorded(), recorded + 4);
}

TEST_F(ReconcilerTest, ConflictIsReturnedForRequeue) {
  SeedDeployment();
  ReconcileAll();
  json* mdep = store_.Mutable(Kind::kModelDeployment, "ns", "tiny");
  (*mdep)["spec"]["decode"]["replicas"] = 2;
  store_.fail_next_updates = 1;
  Status s = deployments_.Reconcile("ns/tiny");
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  EXPECT_TRUE(deployments_.Reconcile("ns/tiny").ok());
  EXPECT_EQ(store_.Get(Kind::kModelPool, "ns", "tiny-decode")->at("spec")["replicas"], 2);
}

}  // namespace
}  // namespace tandem::controller::reconcile
