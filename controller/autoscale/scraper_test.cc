// PodMetricsScraper against real local HTTP servers (TinyHttpServer): bodies that change between
// rounds, keep-alive, failing pods (500, garbage, refused, never answering), bounded rounds, Stop()
// while a scrape is in flight, and the background loop. Waits are on conditions, never sleeps.
#include "controller/autoscale/scraper.h"

#include <chrono>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "controller/kube/testing/tiny_http_server.h"

namespace tandem::controller::autoscale {
namespace {

using kube::testing::TinyConnection;
using kube::testing::TinyHttpServer;
using kube::testing::TinyRequest;
using Seconds = std::chrono::duration<double>;

constexpr auto kWait = std::chrono::seconds(20);  // a generous bound on conditions that should hold soon

// One pod's /metrics: serves the current body and status, or hangs until released.
class FakePod {
 public:
  FakePod() : server_([this](const TinyRequest& r, TinyConnection& c) { Handle(r, c); }) {}
  ~FakePod() { Release(); }  // unblocks hanging handlers before the server joins them

  void Serve(int status, std::string body) {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = status;
    body_ = std::move(body);
  }
  void Hang() {
    std::lock_guard<std::mutex> lock(mu_);
    hang_ = true;
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  bool WaitForRequests(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kWait, [&] { return requests_ >= n; });
  }
  TinyRequest last_request() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_;
  }
  int requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(server_.port()); }
  int connections() const { return server_.connections_accepted(); }

 private:
  void Handle(const TinyRequest& r, TinyConnection& c) {
    std::unique_lock<std::mutex> lock(mu_);
    ++requests_;
    last_ = r;
    cv_.notify_all();
    if (hang_) {
      cv_.wait(lock, [&] { return released_; });
      c.Close();
      return;
    }
    const int status = status_;
    const std::string body = body_;
    lock.unlock();
    c.Respond(status, body);
  }

  std::mutex mu_;
  std::condition_variable cv_;
  int status_ = 200;
  std::string body_;
  bool hang_ = false;
  bool released_ = false;
  int requests_ = 0;
  TinyRequest last_;
  TinyHttpServer server_;  // last: destroyed first, while the members its handler uses still live
};

// prometheus-cpp's layout for one agent: `fast` inter-token latencies <= 10 ms, `slow` in (0.1, 1].
std::string AgentBody(double usage, double waiting, int fast = 0, int slow = 0) {
  const std::string l = "{deployment=\"d\",pool=\"p\",role=\"decode\"";
  const std::string itl = "tandem_inter_token_latency_seconds";
  const std::string all = std::to_string(fast + slow);
  const std::vector<std::string> lines = {
      "# HELP tandem_kv_cache_usage_ratio Fraction of the KV cache's token capacity held.",
      "# TYPE tandem_kv_cache_usage_ratio gauge",
      "tandem_kv_cache_usage_ratio" + l + "} " + std::to_string(usage),
      "# HELP tandem_requests_waiting Requests queued, not yet running.",
      "# TYPE tandem_requests_waiting gauge",
      "tandem_requests_waiting" + l + "} " + std::to_string(waiting),
      "# TYPE tandem_requests_running gauge",
      "tandem_requests_running" + l + "} 3",
      "# TYPE " + itl + " histogram",
      itl + "_count" + l + "} " + all,
      itl + "_sum" + l + "} 1.5",
      itl + "_bucket" + l + ",le=\"0.01\"} " + std::to_string(fast),
      itl + "_bucket" + l + ",le=\"0.10000000000000001\"} " + std::to_string(fast),
      itl + "_bucket" + l + ",le=\"1\"} " + all,
      itl + "_bucket" + l + ",le=\"+Inf\"} " + all,
  };
  std::string body;
  for (const std::string& line : lines) body += line + "\n";
  return body;
}

// Targets the test can change while the scraper runs.
class Targets {
 public:
  void Set(std::vector<PodTarget> t) {
    std::lock_guard<std::mutex> lock(mu_);
    targets_ = std::move(t);
  }
  std::function<std::vector<PodTarget>()> Callback() {
    return [this] {
      std::lock_guard<std::mutex> lock(mu_);
      return targets_;
    };
  }

 private:
  std::mutex mu_;
  std::vector<PodTarget> targets_;
};

// Records on_round calls; lets a test wait for a round that satisfies a condition.
class Rounds {
 public:
  std::function<void(const std::vector<std::string>&)> Callback() {
    return [this](const std::vector<std::string>& keys) {
      std::lock_guard<std::mutex> lock(mu_);
      ++count_;
      last_ = keys;
      cv_.notify_all();
    };
  }
  // Waits for a round after `after` rounds whose keys are `keys`; true when one came.
  bool WaitFor(int after, const std::vector<std::string>& keys) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kWait, [&] { return count_ > after && last_ == keys; });
  }
  // Waits, checking after each round, until `done()` holds; true when it did.
  bool WaitUntil(const std::function<bool()>& done) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kWait, done);
  }
  int count() {
    std::lock_guard<std::mutex> lock(mu_);
    return count_;
  }
  std::vector<std::string> last() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int count_ = 0;
  std::vector<std::string> last_;
};

std::string RefusedAddress() {
  int port;
  {
    TinyHttpServer gone([](const TinyRequest&, TinyConnection&) {});
    port = gone.port();
  }
  return "127.0.0.1:" + std::to_string(port);
}

TEST(PodMetricsScraper, ScrapesEveryMemberAndAggregatesPerPoolAcrossRounds) {
  FakePod a1, a2, b1;
  a1.Serve(200, AgentBody(0.2, 1, 10, 0));
  a2.Serve(200, AgentBody(0.4, 2, 0, 0));
  b1.Serve(200, AgentBody(0.9, 5));
  FakeClock clock(100'000'000'000);
  Targets targets;
  targets.Set({{"ns/a", "a-0", a1.address()}, {"ns/a", "a-1", a2.address()}, {"ns/b", "b-0", b1.address()}});
  Rounds rounds;
  PodMetricsScraperOptions o;
  o.targets = targets.Callback();
  o.on_round = rounds.Callback();
  o.clock = &clock;
  PodMetricsScraper scraper(o);
  EXPECT_FALSE(scraper.Latest("ns/a").has_value());  // before the first round

  scraper.RunOnce();
  std::optional<PoolSignalsSnapshot> a = scraper.Latest("ns/a");
  ASSERT_TRUE(a.has_value());
  EXPECT_DOUBLE_EQ(a->signals.kv_cache_usage.value_or(-1), 0.3);
  EXPECT_EQ(a->signals.waiting_requests, 3);
  EXPECT_FALSE(a->signals.itl_p95_seconds.has_value());  // one scrape: no window yet
  EXPECT_FALSE(a->signals.waiting_prefill_tokens.has_value());
  EXPECT_EQ(a->pods_scraped, 2);
  EXPECT_EQ(a->pods_failed, 0);
  EXPECT_DOUBLE_EQ(a->scraped_at_seconds, 100);
  std::optional<PoolSignalsSnapshot> b = scraper.Latest("ns/b");
  ASSERT_TRUE(b.has_value());
  EXPECT_DOUBLE_EQ(b->signals.kv_cache_usage.value_or(-1), 0.9);
  EXPECT_EQ(b->signals.waiting_requests, 5);
  EXPECT_FALSE(scraper.Latest("ns/other").has_value());
  EXPECT_EQ(rounds.last(), (std::vector<std::string>{"ns/a", "ns/b"}));
  const TinyRequest seen = a1.last_request();
  EXPECT_EQ(seen.method, "GET");
  EXPECT_EQ(seen.target, "/metrics");
  EXPECT_NE(seen.headers.at("accept").find("text/plain;version=0.0.4"), std::string::npos);

  // Second round: a-0 saw 0 more fast and 20 slow tokens, a-1 80 fast: p95 over the summed 100.
  a1.Serve(200, AgentBody(0.6, 0, 10, 20));
  a2.Serve(200, AgentBody(0.2, 0, 80, 0));
  clock.AdvanceMillis(15'000);
  scraper.RunOnce();
  a = scraper.Latest("ns/a");
  ASSERT_TRUE(a.has_value());
  EXPECT_DOUBLE_EQ(a->signals.kv_cache_usage.value_or(-1), 0.4);
  EXPECT_EQ(a->signals.waiting_requests, 0);
  EXPECT_DOUBLE_EQ(a->signals.itl_p95_seconds.value_or(-1), 0.1 + 0.9 * (95.0 - 80) / 20);
  EXPECT_DOUBLE_EQ(a->scraped_at_seconds, 115);
  EXPECT_FALSE(scraper.Latest("ns/b")->signals.itl_p95_seconds.has_value());  // no observation at all

  EXPECT_EQ(a1.connections(), 1);  // keep-alive: one connection per pod across rounds
  const ScraperStats stats = scraper.stats();
  EXPECT_EQ(stats.rounds, 2u);
  EXPECT_EQ(stats.pods_scraped, 6u);
  EXPECT_EQ(stats.pods_failed, 0u);
}

TEST(PodMetricsScraper, ARouterCountsForBothPoolsLatencyOnlyAndIsScrapedOncePerRound) {
  // The router's exposition has gauges too (a router has none of its own in practice; here they
  // would move the means and sums if they counted) and the deployment's ITL histogram.
  FakePod decode, prefill, router;
  decode.Serve(200, AgentBody(0.5, 2));
  prefill.Serve(200, AgentBody(0.1, 0));
  router.Serve(200, AgentBody(0.9, 7, 0, 0));
  Targets targets;
  targets.Set({{"ns/d-decode", "d-decode-0", decode.address()},
               {"ns/d-decode", "d-router-x", router.address(), true},
               {"ns/d-prefill", "d-prefill-0", prefill.address()},
               {"ns/d-prefill", "d-router-x", router.address(), true}});
  PodMetricsScraperOptions o;
  o.targets = targets.Callback();
  PodMetricsScraper scraper(o);
  scraper.RunOnce();
  EXPECT_EQ(router.requests(), 1);
  std::optional<PoolSignalsSnapshot> d = scraper.Latest("ns/d-decode");
  ASSERT_TRUE(d.has_value());
  EXPECT_DOUBLE_EQ(d->signals.kv_cache_usage.value_or(-1), 0.5);  // the router's 0.9 has no say
  EXPECT_EQ(d->signals.waiting_requests, 2);
  EXPECT_EQ(d->pods_scraped, 2);

  // 100 tokens at the router since: both pools see its p95 (a pool plans on the signals of its role).
  router.Serve(200, AgentBody(0.9, 7, 90, 10));
  scraper.RunOnce();
  EXPECT_EQ(router.requests(), 2);
  EXPECT_DOUBLE_EQ(scraper.Latest("ns/d-decode")->signals.itl_p95_seconds.value_or(-1), 0.1 + 0.9 * 0.5);
  EXPECT_DOUBLE_EQ(scraper.Latest("ns/d-prefill")->signals.itl_p95_seconds.value_or(-1), 0.1 + 0.9 * 0.5);
  EXPECT_DOUBLE_EQ(scraper.Latest("ns/d-prefill")->signals.kv_cache_usage.value_or(-1), 0.1);

  // The router failing: both pools count it failed, their members' gauges still stand.
  router.Serve(500, "");
  scraper.RunOnce();
  EXPECT_EQ(router.requests(), 3);
  d = scraper.Latest("ns/d-decode");
  EXPECT_EQ(d->pods_failed, 1);
  EXPECT_EQ(scraper.Latest("ns/d-prefill")->pods_failed, 1);
  EXPECT_DOUBLE_EQ(d->signals.kv_cache_usage.value_or(-1), 0.5);
  EXPECT_FALSE(d->signals.itl_p95_seconds.has_value());
}

TEST(PodMetricsScraper, FailingPodsAreCountedAndContributeNothing) {
  FakePod ok, error, garbage, empty_labels;
  ok.Serve(200, AgentBody(0.5, 4));
  error.Serve(500, AgentBody(0.0, 100));  // a body, but not a 200: not read
  garbage.Serve(200, "<html>not metrics</html>\n");
  empty_labels.Serve(200, "tandem_requests_waiting{pool=\"p\"} 7\ntandem_requests_waiting{");  // truncated
  Targets targets;
  targets.Set({{"ns/a", "ok", ok.address()},
               {"ns/a", "error", error.address()},
               {"ns/a", "garbage", garbage.address()},
               {"ns/a", "truncated", empty_labels.address()},
               {"ns/a", "refused", RefusedAddress()},
               {"ns/a", "bad-address", "10.0.0.1:80/../x"},
               {"ns/a", "ok", ok.address()}});  // listed twice: scraped and counted once
  PodMetricsScraperOptions o;
  o.targets = targets.Callback();
  PodMetricsScraper scraper(o);
  scraper.RunOnce();
  const std::optional<PoolSignalsSnapshot> a = scraper.Latest("ns/a");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->pods_scraped, 1);
  EXPECT_EQ(a->pods_failed, 5);
  EXPECT_EQ(a->signals.kv_cache_usage, 0.5);  // the failures neither count as 0 nor dilute the mean
  EXPECT_EQ(a->signals.waiting_requests, 4);
  EXPECT_EQ(scraper.stats().pods_failed, 5u);
  EXPECT_TRUE(garbage.WaitForRequests(1));
}

TEST(PodMetricsScraper, PodsThatNeverAnswerCostAtMostTheTimeoutAndDoNotHoldOtherPools) {
  constexpr int kDead = 6;
  FakePod healthy;
  healthy.Serve(200, AgentBody(0.7, 1));
  std::vector<std::unique_ptr<FakePod>> dead;
  std::vector<PodTarget> t = {{"ns/healthy", "h-0", healthy.address()}};
  for (int i = 0; i < kDead; ++i) {
    dead.push_back(std::make_unique<FakePod>());
    dead.back()->Hang();
    t.push_back({i % 2 == 0 ? "ns/healthy" : "ns/dead", "d-" + std::to_string(i), dead.back()->address()});
  }
  Targets targets;
  targets.Set(t);
  PodMetricsScraperOptions o;
  o.timeout_ms = 500;
  o.targets = targets.Callback();
  PodMetricsScraper scraper(o);
  const auto start = std::chrono::steady_clock::now();
  scraper.RunOnce();
  const double round_seconds = Seconds(std::chrono::steady_clock::now() - start).count();
  // Concurrent: about one timeout for all of them; one after the other would take kDead timeouts.
  EXPECT_LT(round_seconds, kDead * 0.5 - 0.5);
  EXPECT_GE(round_seconds, 0.4);  // the dead pods were really waited for, up to their deadline
  const std::optional<PoolSignalsSnapshot> h = scraper.Latest("ns/healthy");
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->pods_scraped, 1);
  EXPECT_EQ(h->pods_failed, kDead / 2);
  EXPECT_EQ(h->signals.kv_cache_usage, 0.7);
  const std::optional<PoolSignalsSnapshot> d = scraper.Latest("ns/dead");
  ASSERT_TRUE(d.has_value());  // a pool whose members all fail still gets a snapshot, all absent
  EXPECT_EQ(d->pods_scraped, 0);
  EXPECT_EQ(d->pods_failed, kDead / 2);
  EXPECT_FALSE(d->signals.kv_cache_usage || d->signals.waiting_requests || d->signals.itl_p95_seconds);
}

TEST(PodMetricsScraper, StopWhileASlowPodIsBeingScrapedReturnsPromptly) {
  FakePod slow;
  slow.Hang();
  Targets targets;
  targets.Set({{"ns/a", "a-0", slow.address()}});
  Rounds rounds;
  PodMetricsScraperOptions o;
  o.timeout_ms = 30'000;  // Stop() must not wait for it: it cancels the request
  o.targets = targets.Callback();
  o.on_round = rounds.Callback();
  PodMetricsScraper scraper(o);
  scraper.Start();
  ASSERT_TRUE(slow.WaitForRequests(1));
  const auto start = std::chrono::steady_clock::now();
  scraper.Stop();
  EXPECT_LT(Seconds(std::chrono::steady_clock::now() - start).count(), 5.0);
  EXPECT_FALSE(scraper.Latest("ns/a").has_value());  // the round was cut short: nothing published
  EXPECT_EQ(rounds.count(), 0);
  EXPECT_EQ(scraper.stats().rounds, 0u);
}

TEST(PodMetricsScraper, DestructorStopsARunningScraperPromptly) {
  FakePod slow;
  slow.Hang();
  Targets targets;
  targets.Set({{"ns/a", "a-0", slow.address()}});
  PodMetricsScraperOptions o;
  o.timeout_ms = 30'000;
  o.targets = targets.Callback();
  auto scraper = std::make_unique<PodMetricsScraper>(o);
  scraper->Start();
  ASSERT_TRUE(slow.WaitForRequests(1));
  const auto start = std::chrono::steady_clock::now();
  scraper.reset();
  EXPECT_LT(Seconds(std::chrono::steady_clock::now() - start).count(), 5.0);
}

TEST(PodMetricsScraper, LatestDoesNotWaitForARoundInFlight) {
  FakePod pod;
  pod.Serve(200, AgentBody(0.25, 2));
  Targets targets;
  targets.Set({{"ns/a", "a-0", pod.address()}});
  PodMetricsScraperOptions o;
  o.timeout_ms = 30'000;
  o.targets = targets.Callback();
  PodMetricsScraper scraper(o);
  scraper.RunOnce();
  pod.Hang();
  std::thread round([&] { scraper.RunOnce(); });
  ASSERT_TRUE(pod.WaitForRequests(2));
  // The round is blocked on the pod; Latest() still answers with the previous round's snapshot.
  const std::optional<PoolSignalsSnapshot> a = scraper.Latest("ns/a");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->signals.kv_cache_usage, 0.25);
  EXPECT_EQ(scraper.stats().rounds, 1u);
  pod.Release();  // the pod closes the connection without an answer: a failed scrape
  round.join();
  EXPECT_EQ(scraper.Latest("ns/a")->pods_failed, 1);
  EXPECT_FALSE(scraper.Latest("ns/a")->signals.kv_cache_usage.has_value());
}

TEST(PodMetricsScraper, BackgroundRoundsFollowChangingBodiesAndTargets) {
  FakePod a, b;
  a.Serve(200, AgentBody(0.1, 0));
  b.Serve(200, AgentBody(0.2, 0));
  Targets targets;
  targets.Set({{"ns/a", "a-0", a.address()}, {"ns/b", "b-0", b.address()}});
  Rounds rounds;
  PodMetricsScraperOptions o;
  o.interval_ms = 10;
  o.targets = targets.Callback();
  o.on_round = rounds.Callback();
  PodMetricsScraper scraper(o);
  scraper.Start();
  ASSERT_TRUE(rounds.WaitFor(0, {"ns/a", "ns/b"}));
  EXPECT_EQ(scraper.Latest("ns/b")->signals.kv_cache_usage, 0.2);

  a.Serve(200, AgentBody(0.8, 0));
  EXPECT_TRUE(rounds.WaitUntil([&] { return scraper.Latest("ns/a")->signals.kv_cache_usage == 0.8; }));

  // b leaves: its snapshot goes, and so does its client (and keep-alive connection).
  targets.Set({{"ns/a", "a-0", a.address()}});
  ASSERT_TRUE(rounds.WaitFor(rounds.count(), {"ns/a"}));
  EXPECT_FALSE(scraper.Latest("ns/b").has_value());
  EXPECT_EQ(b.connections(), 1);
  targets.Set({{"ns/a", "a-0", a.address()}, {"ns/b", "b-0", b.address()}});
  ASSERT_TRUE(rounds.WaitFor(rounds.count(), {"ns/a", "ns/b"}));
  EXPECT_EQ(b.connections(), 2);  // a fresh client
  EXPECT_EQ(a.connections(), 1);

  scraper.Stop();
  const int stopped_at = rounds.count();
  scraper.Start();  // restartable
  ASSERT_TRUE(rounds.WaitFor(stopped_at, {"ns/a", "ns/b"}));
  scraper.Stop();
}

TEST(PodMetricsScraper, NoTargetsPublishesAnEmptyRound) {
  Rounds rounds;
  PodMetricsScraperOptions o;  // no targets callback at all
  o.on_round = rounds.Callback();
  PodMetricsScraper scraper(o);
  scraper.RunOnce();
  EXPECT_EQ(rounds.count(), 1);
  EXPECT_TRUE(rounds.last().empty());
  EXPECT_EQ(scraper.stats().rounds, 1u);
}

}  // namespace
}  // namespace tandem::controller::autoscale
