#include "controller/metrics/controller_metrics.h"

#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "common/clock.h"
#include "controller/metrics/workqueue_hooks.h"
#include "controller/runtime/workqueue.h"

namespace tandem::controller::metrics {
namespace {

// The sample line `series` (name{labels}) from an exposition, or "" when absent.
std::string Line(const std::string& text, const std::string& series) {
  size_t at = 0;
  while ((at = text.find(series + " ", at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n') return text.substr(at, text.find('\n', at) - at);
    ++at;
  }
  return "";
}

// prometheus-cpp leaves out families without series, so a fresh registry shows only the
// leader gauge; once each family has a series it carries HELP and TYPE.
TEST(ControllerMetricsTest, EveryFamilyHasHelpAndTypeOnceUsed) {
  ControllerMetrics m;
  EXPECT_EQ(m.Serialize(),
            "# HELP tandem_controller_leader 1 while this controller holds the leader Lease, else 0.\n"
            "# TYPE tandem_controller_leader gauge\n"
            "tandem_controller_leader 0\n");
  m.ObserveReconcile("modelpool", kResultSuccess, 0.1);
  m.SetPoolReplicas("d", "d-decode", kReplicasReady, 1);
  m.CountAutoscalerDecision("llm", "decode", "up");
  m.CountResync("modelpool");
  m.SetWorkQueueDepth("q", 0);
  m.CountWorkQueueAdd("q");
  m.CountWorkQueueRetry("q");
  m.ObserveWorkQueueLatency("q", 0.5);
  m.ObserveWorkQueueWork("q", 0.5);
  const std::string text = m.Serialize();
  const std::pair<const char*, const char*> families[] = {
      {"tandem_controller_reconcile_total", "counter"},
      {"tandem_controller_reconcile_duration_seconds", "histogram"},
      {"tandem_pool_replicas", "gauge"},
      {"tandem_autoscaler_decisions_total", "counter"},
      {"tandem_controller_resyncs_total", "counter"},
      {"tandem_workqueue_depth", "gauge"},
      {"tandem_workqueue_adds_total", "counter"},
      {"tandem_workqueue_retries_total", "counter"},
      {"tandem_workqueue_queue_duration_seconds", "histogram"},
      {"tandem_workqueue_work_duration_seconds", "histogram"},
      {"tandem_controller_leader", "gauge"}};
  for (const auto& [family, type] : families) {
    EXPECT_NE(text.find(std::string("# HELP ") + family + " "), std::string::npos) << family;
    EXPECT_NE(text.find(std::string("# TYPE ") + family + " " + type + "\n"), std::string::npos) << family;
  }
}

TEST(ControllerMetricsTest, ReconcileCountsByResultAndObservesDuration) {
  ControllerMetrics m;
  m.ObserveReconcile("modeldeployment", kResultSuccess, 0.003);
  m.ObserveReconcile("modeldeployment", kResultSuccess, 0.2);
  m.ObserveReconcile("modeldeployment", kResultError, 7);
  m.ObserveReconcile("modelpool", kResultRequeue, 0.01);
  const std::string t = m.Serialize();
  EXPECT_EQ(Line(t, R"(tandem_controller_reconcile_total{controller="modeldeployment",result="success"})"),
            R"(tandem_controller_reconcile_total{controller="modeldeployment",result="success"} 2)");
  EXPECT_NE(Line(t, R"(tandem_controller_reconcile_total{controller="modeldeployment",result="error"})"), "");
  EXPECT_NE(Line(t, R"(tandem_controller_reconcile_total{controller="modelpool",result="requeue"})"), "");
  const std::string prefix =
      R"(tandem_controller_reconcile_duration_seconds_bucket{controller="modeldeployment",le=)";
  EXPECT_EQ(Line(t, prefix + R"("0.005"})"), prefix + R"("0.005"} 1)");
  EXPECT_EQ(Line(t, prefix + R"("0.25"})"), prefix + R"("0.25"} 2)");
  EXPECT_EQ(Line(t, prefix + R"("10"})"), prefix + R"("10"} 3)");
  EXPECT_EQ(Line(t, prefix + R"("+Inf"})"), prefix + R"("+Inf"} 3)");
  EXPECT_EQ(Line(t, R"(tandem_controller_reconcile_duration_seconds_count{controller="modeldeployment"})"),
            R"(tandem_controller_reconcile_duration_seconds_count{controller="modeldeployment"} 3)");
}

TEST(ControllerMetricsTest, PoolReplicasAreSetAndForgotten) {
  ControllerMetrics m;
  m.SetPoolReplicas("kimi", "kimi-decode", kReplicasDesired, 4);
  m.SetPoolReplicas("kimi", "kimi-decode", kReplicasReady, 3);
  m.SetPoolReplicas("kimi", "kimi-decode", kReplicasReady, 4);
  m.SetPoolReplicas("kimi", "kimi-prefill", kReplicasReady, 2);
  std::string t = m.Serialize();
  EXPECT_NE(Line(t, R"(tandem_pool_replicas{deployment="kimi",pool="kimi-decode",state="desired"})"), "");
  EXPECT_EQ(Line(t, R"(tandem_pool_replicas{deployment="kimi",pool="kimi-decode",state="ready"})"),
            R"(tandem_pool_replicas{deployment="kimi",pool="kimi-decode",state="ready"} 4)");
  m.ForgetPool("kimi", "kimi-decode");
  m.ForgetPool("kimi", "no-such-pool");
  t = m.Serialize();
  EXPECT_EQ(t.find("kimi-decode"), std::string::npos);
  EXPECT_NE(Line(t, R"(tandem_pool_replicas{deployment="kimi",pool="kimi-prefill",state="ready"})"), "");
}

TEST(ControllerMetricsTest, AutoscalerLeaderAndLabelEscaping) {
  ControllerMetrics m;
  m.CountAutoscalerDecision("llm", "decode", "up");
  m.CountAutoscalerDecision("llm", "decode", "up");
  m.CountAutoscalerDecision("llm", "prefill", "down");
  m.SetLeader(true);
  m.SetPoolReplicas("a\"b", "p\\q", kReplicasCurrent, 1);  // exposition escapes " and backslash
  const std::string t = m.Serialize();
  EXPECT_EQ(Line(t, R"(tandem_autoscaler_decisions_total{deployment="llm",direction="up",pool="decode"})"),
            R"(tandem_autoscaler_decisions_total{deployment="llm",direction="up",pool="decode"} 2)");
  EXPECT_EQ(Line(t, "tandem_controller_leader"), "tandem_controller_leader 1");
  EXPECT_NE(t.find(R"(deployment="a\"b",pool="p\\q")"), std::string::npos);
  m.SetLeader(false);
  EXPECT_EQ(Line(m.Serialize(), "tandem_controller_leader"), "tandem_controller_leader 0");
}

TEST(ControllerMetricsTest, WorkQueueHooksFeedTheWorkqueueFamilies) {
  ControllerMetrics m;
  FakeClock clock;
  runtime::WorkQueue q("modeldeployment", clock, nullptr, WorkQueueHooks(&m, "modeldeployment"));
  q.Add("ns/a");
  q.Add("ns/b");
  q.Add("ns/a");  // de-duplicated, still counted as an add
  std::string t = m.Serialize();
  EXPECT_EQ(Line(t, R"(tandem_workqueue_depth{name="modeldeployment"})"),
            R"(tandem_workqueue_depth{name="modeldeployment"} 2)");
  EXPECT_EQ(Line(t, R"(tandem_workqueue_adds_total{name="modeldeployment"})"),
            R"(tandem_workqueue_adds_total{name="modeldeployment"} 3)");
  clock.AdvanceMillis(20);
  std::optional<std::string> key = q.TryGet();
  ASSERT_TRUE(key.has_value());
  clock.AdvanceMillis(3000);
  q.Done(*key);
  q.AddRateLimited("ns/c");  // no limiter: an immediate add, counted as a retry
  t = m.Serialize();
  EXPECT_EQ(Line(t, R"(tandem_workqueue_retries_total{name="modeldeployment"})"),
            R"(tandem_workqueue_retries_total{name="modeldeployment"} 1)");
  // 20 ms waiting: in the 0.1 bucket, not the 0.01 one; 3 s of work: in 10, not 1.
  const std::string wait = R"(tandem_workqueue_queue_duration_seconds_bucket{name="modeldeployment",le=)";
  EXPECT_EQ(Line(t, wait + R"("0.01"})"), wait + R"("0.01"} 0)");
  EXPECT_EQ(Line(t, wait + R"("0.1"})"), wait + R"("0.1"} 1)");
  const std::string work = R"(tandem_workqueue_work_duration_seconds_bucket{name="modeldeployment",le=)";
  EXPECT_EQ(Line(t, work + R"("1"})"), work + R"("1"} 0)");
  EXPECT_EQ(Line(t, work + R"("10"})"), work + R"("10"} 1)");
}

}  // namespace
}  // namespace tandem::controller::metrics
