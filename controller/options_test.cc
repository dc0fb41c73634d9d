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
