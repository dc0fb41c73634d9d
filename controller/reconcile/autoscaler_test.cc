// The built-in autoscaler inside the ModelPool reconcile, against the in-memory store: signals
// from a fake source, pods seeded by hand, a fake monotonic clock.
#include "controller/reconcile/autoscaler.h"

#include <map>

#include <gtest/gtest.h>

#include "controller/autoscale/signals.h"
#include "controller/metrics/controller_metrics.h"
#include "controller/reconcile/memory_store.h"
#include "controller/reconcile/pool_plan.h"
#include "controller/reconcile/reconciler.h"

namespace tandem::controller::reconcile {
namespace {

class FakeSignals : public autoscale::SignalSource {
 public:
  std::optional<autoscale::PoolSignalsSnapshot> Latest(const std::string& pool_key) const override {
    auto it = snapshots.find(pool_key);
    if (it == snapshots.end()) return std::nullopt;
    return it->second;
  }
  std::map<std::string, autoscale::PoolSignalsSnapshot> snapshots;
};

// The number in the one exposition line that starts with `prefix`, or -1.
double Sample(const std::string& text, const std::string& prefix) {
  size_t at = text.find("\n" + prefix);
  if (at == std::string::npos) return -1;
  size_t end = text.find('\n', at + 1);
  std::string line = text.substr(at + 1, end - at - 1);
  return std::stod(line.substr(line.rfind(' ') + 1));
}

class AutoscalerTest : public testing::Test {
 protected:
  AutoscalerTest() : events_(&store_, "tandem-controller", [this] { return now_; }) {
    ReconcileContext ctx;
    ctx.store = &store_;
    ctx.events = &events_;
    ctx.metrics = &metrics_;
    ctx.unix_seconds = [this] { return now_; };
    ctx.autoscale.signals = &signals_;
    ctx.autoscale.memory = &memory_;
    ctx.autoscale.clock = &clock_;
    deployments_ = std::make_unique<ModelDeploymentReconciler>(ctx);
    pools_ = std::make_unique<ModelPoolReconciler>(ctx);
  }

  // A deployment whose decode pool autoscales 1..4 on KV usage (target 0.5), windows 30 s up and
  // 60 s down, steps of 2 up and 1 down; prefill fixed at 1.
  void SeedDeployment(const json& decode_extra = json::object()) {
    json decode = {{"replicas", 1},
                   {"autoscaling",
                    {{"enabled", true},
                     {"minReplicas", 1},
                     {"maxReplicas", 4},
                     {"targetKvCacheUsage", 0.5},
                     {"targetWaitingRequestsPerReplica", 0},
                     {"scaleUpDelaySeconds", 30},
                     {"scaleDownDelaySeconds", 60},
                     {"maxScaleUpStep", 2}}}};
    decode.merge_patch(decode_extra);
    json mdep = json::parse(R"({
      "apiVersion": "tandem.dev/v1alpha1", "kind": "ModelDeployment",
      "metadata": {"name": "llm", "namespace": "ns", "uid": "mdep-uid", "generation": 1},
      "spec": {"model": {"name": "t", "dummy": {"preset": "tiny", "seed": 1}},
               "router": {"replicas": 1}, "prefill": {"replicas": 1}}})");
    mdep["spec"]["decode"] = decode;
    store_.Seed(Kind::kModelDeployment, mdep);
    ASSERT_TRUE(deployments_->Reconcile("ns/llm").ok());
  }

  // The decode pool's pods: `ready` of them Ready, `pending` more not yet.
  void SetPods(int ready, int pending) {
    for (int i = 0; i < 8; ++i) (void)store_.Delete(Kind::kPod, "ns", "llm-decode-" + std::to_string(i), "");
    for (int i = 0; i < ready + pending; ++i) {
      const bool is_ready = i < ready;
      json pod = {
          {"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", "llm-decode-" + std::to_string(i)},
            {"namespace", "ns"},
            {"labels", PoolSelector("llm", "decode")}}},
          {"status",
           {{"phase", is_ready ? "Running" : "Pending"},
            {"conditions", json::array({{{"type", "Ready"}, {"status", is_ready ? "True" : "False"}}})}}}};
      store_.Seed(Kind::kPod, pod);
    }
  }

  void Load(double kv_usage) {
    autoscale::PoolSignalsSnapshot s;
    s.signals.kv_cache_usage = kv_usage;
    s.scraped_at_seconds = clock_.NowSeconds();
    s.pods_scraped = 1;
    signals_.snapshots["ns/llm-decode"] = s;
  }

  // Advances both clocks by `seconds` and reconciles the decode pool once.
  void Step(int64_t seconds) {
    clock_.AdvanceMillis(seconds * 1000);
    now_ += seconds;
    ASSERT_TRUE(pools_->Reconcile("ns/llm-decode").ok());
  }

  int64_t Replicas() { return store_.Get(Kind::kModelPool, "ns", "llm-decode")->at("spec")["replicas"]; }
  json Autoscaler() {
    return store_.Get(Kind::kModelPool, "ns", "llm-decode")->at("status").value("autoscaler", json());
  }

  int64_t now_ = 1'764'550'800;  // 2025-12-01T01:00:00Z
  MemoryStore store_;
  EventRecorder events_;
  metrics::ControllerMetrics metrics_;
  FakeSignals signals_;
  AutoscaleMemory memory_;
  FakeClock clock_{1'000'000'000'000};
  std::unique_ptr<ModelDeploymentReconciler> deployments_;
  std::unique_ptr<ModelPoolReconciler> pools_;
};

TEST_F(AutoscalerTest, HighKvUsageScalesUpAfterTheWindowWithAnEventAMetricAndStatus) {
  SeedDeployment();
  SetPods(1, 0);
  Load(0.9);  // 1 ready * 0.9 / 0.5 -> 2
  Step(0);
  EXPECT_EQ(Replicas(), 1);  // nothing watched yet: a whole up window first
  EXPECT_EQ(Autoscaler()["reason"], "Stabilizing");
  EXPECT_EQ(Autoscaler()["recommendedReplicas"], 2);
  for (int i = 0; i < 3; ++i) {
    Load(0.9);
    Step(15);
  }
  EXPECT_EQ(Replicas(), 2);
  json a = Autoscaler();
  EXPECT_EQ(a["reason"], "KvCacheAboveTarget");
  EXPECT_EQ(a["lastScale"]["direction"], "up");
  EXPECT_EQ(a["lastScale"]["from"], 1);
  EXPECT_EQ(a["lastScale"]["to"], 2);
  EXPECT_EQ(a["lastScale"]["reason"], "KvCacheAboveTarget");
  // The StatefulSet follows in the same pass.
  EXPECT_EQ(store_.Get(Kind::kStatefulSet, "ns", "llm-decode")->at("spec")["replicas"], 2);
  const std::string m = metrics_.Serialize();
  EXPECT_EQ(Sample(m, R"(tandem_autoscaler_decisions_total{deployment="llm",direction="up",pool="decode"})"),
            1);
  bool event = false;
  StatusOr<std::vector<json>> listed = store_.List(Kind::kEvent, "ns", json::object());
  ASSERT_TRUE(listed.ok());
  for (const json& e : *listed) {
    if (e.value("reason", "") == "ScaledUp") {
      event = true;
      EXPECT_NE(e["message"].get<std::string>().find("decode 1 -> 2: KvCacheAboveTarget"), std::string::npos)
          << e["message"];
    }
  }
  EXPECT_TRUE(event);
}

TEST_F(AutoscalerTest, NoScaleUpWhileTheLastScaleUpsPodsArePending) {
  SeedDeployment();
  SetPods(1, 0);
  for (int i = 0; i < 4; ++i) {
    Load(0.9);
    Step(15);
  }
  ASSERT_EQ(Replicas(), 2);
  SetPods(1, 1);  // the new pod is not Ready yet
  for (int i = 0; i < 6; ++i) {
    Load(0.99);
    Step(15);
  }
  EXPECT_EQ(Replicas(), 2);
  SetPods(2, 0);  // it is: 2 * 0.99 / 0.5 -> 4, once a whole up window has seen it
  for (int i = 0; i < 3; ++i) {
    Load(0.99);
    Step(15);
  }
  EXPECT_EQ(Replicas(), 4);
}

TEST_F(AutoscalerTest, StaleOrMissingSignalsHoldThePool) {
  SeedDeployment({{"replicas", 3}});
  SetPods(3, 0);
  for (int i = 0; i < 10; ++i) Step(15);  // never scraped: no signals at all
  EXPECT_EQ(Replicas(), 3);
  EXPECT_EQ(Autoscaler()["reason"], "NoSignals");
  Load(0.01);  // very low, but the scraper then stalls: 61 s old at the next look
  Step(61);
  EXPECT_EQ(Replicas(), 3);
  EXPECT_EQ(Autoscaler()["reason"], "NoSignals");
}

TEST_F(AutoscalerTest, LowUsageScalesDownOneAtATimeAfterTheDownWindow) {
  SeedDeployment({{"replicas", 3}});
  SetPods(3, 0);
  int64_t seen_at_two = -1;
  for (int i = 0; i < 12; ++i) {
    Load(0.05);
    Step(15);
    if (Replicas() == 2 && seen_at_two < 0) seen_at_two = i;
  }
  ASSERT_GE(seen_at_two, 3);  // not before a whole 60 s down window was watched
  EXPECT_EQ(Autoscaler()["lastScale"]["direction"], "down");
  EXPECT_EQ(Sample(metrics_.Serialize(),
                   R"(tandem_autoscaler_decisions_total{deployment="llm",direction="down",pool="decode"})"),
            3 - Replicas());
}

TEST_F(AutoscalerTest, ExternalModeStandsAside) {
  SeedDeployment({{"replicas", 2}, {"autoscaling", {{"mode", "external"}, {"maxReplicas", nullptr}}}});
  SetPods(2, 0);
  for (int i = 0; i < 10; ++i) {
    Load(0.99);
    Step(15);
  }
  EXPECT_EQ(Replicas(), 2);
  EXPECT_TRUE(Autoscaler().is_null());
  EXPECT_EQ(memory_.size(), 0u);
}

TEST_F(AutoscalerTest, AConflictOnTheReplicaWriteIsReturnedForRequeue) {
  SeedDeployment();
  SetPods(1, 0);
  store_.fail_next_updates = 1;  // the first write (the scale-up) conflicts
  bool aborted = false;
  for (int i = 0; i < 6 && !aborted; ++i) {
    Load(0.9);
    clock_.AdvanceMillis(15'000);
    aborted = pools_->Reconcile("ns/llm-decode").code() == StatusCode::kAborted;
  }
  ASSERT_TRUE(aborted);
  EXPECT_EQ(Replicas(), 1);
  ASSERT_TRUE(pools_->Reconcile("ns/llm-decode").ok());  // the requeue
  EXPECT_EQ(Replicas(), 2);
}

TEST_F(AutoscalerTest, TheGpuBudgetCapsTheScaleUp) {
  // GPU pools: 1 GPU per decode pod, and the prefill pool holds 1: a budget of 3 leaves decode 2.
  const json gpu = {{"limits", {{"nvidia.com/gpu", 1}}}};
  SeedDeployment({{"resources", gpu}});
  json* mdep = store_.Mutable(Kind::kModelDeployment, "ns", "llm");
  (*mdep)["spec"]["gpuBudget"] = 3;
  (*mdep)["spec"]["prefill"]["resources"] = gpu;
  (*mdep)["metadata"]["generation"] = 2;
  ASSERT_TRUE(deployments_->Reconcile("ns/llm").ok());
  SetPods(1, 0);
  for (int i = 0; i < 4; ++i) {
    Load(0.9);
    Step(15);
  }
  ASSERT_EQ(Replicas(), 2);
  SetPods(2, 0);
  for (int i = 0; i < 4; ++i) {
    Load(0.99);  // wants 4
    Step(15);
  }
  EXPECT_EQ(Replicas(), 2);
  EXPECT_EQ(Autoscaler()["reason"], "GpuBudget");
}

}  // namespace
}  // namespace tandem::controller::reconcile
