#include "controller/options.h"

#include <gtest/gtest.h>

namespace tandem::controller {
namespace {

TEST(ControllerOptionsTest, Defaults) {
  StatusOr<ControllerOptions> o = ParseControllerFlags({});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_TRUE(o->leader_elect);
  EXPECT_EQ(o->metrics_bind_address, ":8080");
  EXPECT_EQ(o->lease_duration_s, 15);
  EXPECT_EQ(o->renew_deadline_s, 10);
  EXPECT_EQ(o->retry_period_s, 2);
  EXPECT_EQ(o->resync_period_s, 36000);
}

TEST(ControllerOptionsTest, BothFlagSpellings) {
  StatusOr<ControllerOptions> o =
      ParseControllerFlags({"--kubeconfig", "/tmp/kc", "--leader-elect=false", "--lease-duration=30",
                            "--renew-deadline", "20", "--namespace=ml"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->kubeconfig, "/tmp/kc");
  EXPECT_FALSE(o->leader_elect);
  EXPECT_EQ(o->lease_duration_s, 30);
  EXPECT_EQ(o->renew_deadline_s, 20);
  EXPECT_EQ(o->watch_namespace, "ml");
}

TEST(ControllerOptionsTest, ReconcilerFlags) {
  StatusOr<ControllerOptions> o =
      ParseControllerFlags({"--workers=4", "--agent-image", "registry/agent:1",
                            "--leader-election-identity=pod-a", "--qps=50.5", "--burst", "80"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->workers, 4);
  EXPECT_EQ(o->agent_image, "registry/agent:1");
  EXPECT_EQ(o->leader_election_identity, "pod-a");
  EXPECT_EQ(o->qps, 50.5);
  EXPECT_EQ(o->burst, 80);
  EXPECT_EQ(ParseControllerFlags({"--resync-period=0"})->resync_period_s, 0);
  EXPECT_EQ(ParseControllerFlags({"--resync-period", "3"})->resync_period_s, 3);
  EXPECT_FALSE(ParseControllerFlags({"--resync-period=-1"}).ok());
  EXPECT_FALSE(ParseControllerFlags({"--resync-period=1h"}).ok());
  EXPECT_EQ(ParseControllerFlags({})->autoscale_interval_s, 15);
  EXPECT_EQ(ParseControllerFlags({"--autoscale-interval=0"})->autoscale_interval_s, 0);
  EXPECT_EQ(ParseControllerFlags({"--scrape-timeout-ms", "250"})->scrape_timeout_ms, 250);
  EXPECT_FALSE(ParseControllerFlags({"--scrape-timeout-ms=0"}).ok());
  EXPECT_FALSE(ParseControllerFlags({"--autoscale-interval=-1"}).ok());
  EXPECT_FALSE(ParseControllerFlags({"--qps=0"}).ok());
  EXPECT_FALSE(ParseControllerFlags({"--burst=x"}).ok());
  EXPECT_FALSE(ParseControllerFlags({"--workers=0"}).ok());
  EXPECT_FALSE(ParseControllerFlags({"--workers=100"}).ok());
  EXPECT_FALSE(ParseControllerFlags({"--agent-image="}).ok());
}

TEST(ControllerOptionsTest, PrometheusSignalSourceFlags) {
  StatusOr<ControllerOptions> o = ParseControllerFlags({});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->prometheus_url, "");  // the pod scraper
  EXPECT_EQ(o->prometheus_selector, R"(namespace="{namespace}",deployment="{deployment}",pool="{pool}")");
  EXPECT_EQ(o->prometheus_latency_selector,
            R"(namespace="{namespace}",deployment="{deployment}",pool="router")");
  EXPECT_EQ(o->prometheus_rate_window, "2m");

  o = ParseControllerFlags({"--prometheus-url", "http://prometheus.monitoring:9090/",
                            R"(--prometheus-selector=kubernetes_namespace="{namespace}",app="{deployment}")",
                            R"(--prometheus-latency-selector=app="{deployment}-router")",
                            "--prometheus-rate-window=1m30s"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->prometheus_url, "http://prometheus.monitoring:9090/");
  EXPECT_EQ(o->prometheus_selector, R"(kubernetes_namespace="{namespace}",app="{deployment}")");
  EXPECT_EQ(o->prometheus_latency_selector, R"(app="{deployment}-router")");
  EXPECT_EQ(o->prometheus_rate_window, "1m30s");

  struct Case {
    std::vector<std::string> args;
    const char* expect;
  };
  const Case cases[] = {
      {{"--prometheus-url=prometheus:9090"}, "--prometheus-url: Prometheus URL"},
      {{"--prometheus-url=http://u:p@h:9090"}, "--prometheus-url"},
      {{"--prometheus-url=http://h/q?x=1"}, "--prometheus-url"},
      {{"--prometheus-selector="}, "--prometheus-selector: the selector template is empty"},
      {{R"(--prometheus-selector=namespace="{ns}")"}, "--prometheus-selector: selector template, byte 11"},
      {{R"(--prometheus-latency-selector=a="b"})"}, "--prometheus-latency-selector"},
      {{"--prometheus-rate-window=2"}, "--prometheus-rate-window: duration '2'"},
      {{"--prometheus-rate-window=0s"}, "--prometheus-rate-window"},
      {{"--prometheus-rate-window=1.5m"}, "--prometheus-rate-window"},
      {{"--prometheus-url"}, "--prometheus-url: missing value"},
  };
  for (const Case& c : cases) {
    StatusOr<ControllerOptions> bad = ParseControllerFlags(c.args);
    ASSERT_FALSE(bad.ok()) << c.args[0];
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(bad.status().message().find(c.expect), std::string::npos) << bad.status().message();
  }
}

TEST(ControllerOptionsTest, Errors) {
  struct Case {
    std::vector<std::string> args;
    const char* expect;
  };
  const Case cases[] = {
      {{"--frobnicate=1"}, "unknown flag --frobnicate"},
      {{"positional"}, "unexpected argument"},
      {{"--kubeconfig"}, "--kubeconfig: missing value"},
      {{"--lease-duration=abc"}, "want a positive number of seconds"},
      {{"--lease-duration=15s"}, "want a positive number of seconds"},
      {{"--retry-period=0"}, "want a positive number of seconds"},
      {{"--leader-elect=yes"}, "want true or false"},
      {{"--renew-deadline=15"}, "--retry-period < --renew-deadline < --lease-duration"},
      {{"--leader-election-id="}, "--leader-elect needs"},
  };
  for (const Case& c : cases) {
    StatusOr<ControllerOptions> o = ParseControllerFlags(c.args);
    ASSERT_FALSE(o.ok()) << c.args[0];
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(o.status().message().find(c.expect), std::string::npos) << o.status().message();
  }
}

}  // namespace
}  // namespace tandem::controller
