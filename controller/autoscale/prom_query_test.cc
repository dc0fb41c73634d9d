// PrometheusSignalSource against a fake Prometheus query API on loopback (TinyHttpServer): the
// requests it sends, answers with values, without values and with errors, oversized answers, a
// server that never answers (timeout, Stop(), Latest() meanwhile), and the background loop. Waits
// are on conditions, never sleeps.
#include "controller/autoscale/prom_query.h"

#include <chrono>
#include <condition_variable>
#include <map>
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

std::string UrlDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i] == '+' ? ' ' : s[i];
    }
  }
  return out;
}

// The query string's parameters of a request target.
std::map<std::string, std::string> Params(const std::string& target) {
  std::map<std::string, std::string> out;
  const size_t q = target.find('?');
  if (q == std::string::npos) return out;
  std::string_view rest = std::string_view(target).substr(q + 1);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    const size_t eq = pair.find('=');
    out[std::string(pair.substr(0, eq))] = eq == std::string::npos ? "" : UrlDecode(pair.substr(eq + 1));
    rest = amp == std::string::npos ? std::string_view() : rest.substr(amp + 1);
  }
  return out;
}

std::string VectorAnswer(std::string_view value) {
  return R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000,")" +
         std::string(value) + R"("]}]}})";
}
const std::string kEmptyAnswer = R"({"status":"success","data":{"resultType":"vector","result":[]}})";

struct Reply {
  int status = 200;
  std::string body;
};

// A Prometheus query API: answers each query with the reply of the first rule whose needle the
// query contains (else an empty vector), or hangs until released.
class FakePrometheus {
 public:
  FakePrometheus() : server_([this](const TinyRequest& r, TinyConnection& c) { Handle(r, c); }) {}
  ~FakePrometheus() { Release(); }

  void Answer(std::string needle, Reply reply) {
    std::lock_guard<std::mutex> lock(mu_);
    rules_[std::move(needle)] = std::move(reply);
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
  bool WaitForRequests(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kWait, [&] { return requests_.size() >= n; });
  }
  std::vector<TinyRequest> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  // The decoded `query` parameters received so far.
  std::vector<std::string> queries() {
    std::vector<std::string> out;
    for (const TinyRequest& r : requests()) out.push_back(Params(r.target)["query"]);
    return out;
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_.port()); }
  int connections() const { return server_.connections_accepted(); }

 private:
  void Handle(const TinyRequest& r, TinyConnection& c) {
    std::unique_lock<std::mutex> lock(mu_);
    requests_.push_back(r);
    cv_.notify_all();
    if (hang_) {
      cv_.wait(lock, [&] { return released_; });
      c.Close();
      return;
    }
    const std::string query = Params(r.target)["query"];
    Reply reply{200, kEmptyAnswer};
    for (const auto& [needle, rule] : rules_) {
      if (query.find(needle) != std::string::npos) {
        reply = rule;
        break;
      }
    }
    lock.unlock();
    c.Respond(reply.status, reply.body);
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Reply> rules_;
  bool hang_ = false;
  bool released_ = false;
  std::vector<TinyRequest> requests_;
  TinyHttpServer server_;  // last: destroyed first, while the members its handler uses still live
};

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
  bool WaitFor(int after, const std::vector<std::string>& keys) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kWait, [&] { return count_ > after && last_ == keys; });
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

// Pools the test can change while the source runs.
class Pools {
 public:
  void Set(std::vector<PoolQueryTarget> p) {
    std::lock_guard<std::mutex> lock(mu_);
    pools_ = std::move(p);
  }
  std::function<std::vector<PoolQueryTarget>()> Callback() {
    return [this] {
      std::lock_guard<std::mutex> lock(mu_);
      return pools_;
    };
  }

 private:
  std::mutex mu_;
  std::vector<PoolQueryTarget> pools_;
};

const PoolQueryTarget kDecode{"ml/llama-decode", {"ml", "llama", "decode"}};
const PoolQueryTarget kPrefill{"ml/llama-prefill", {"ml", "llama", "prefill"}};

std::unique_ptr<PrometheusSignalSource> NewSource(PrometheusSignalSourceOptions o) {
  StatusOr<std::unique_ptr<PrometheusSignalSource>> source = PrometheusSignalSource::New(std::move(o));
  EXPECT_TRUE(source.ok()) << source.status().ToString();
  return source.ok() ? std::move(source).value() : nullptr;
}

TEST(PrometheusSignalSource, QueriesEachPoolsSignalsIntoItsSnapshot) {
  FakePrometheus prom;
  prom.Answer("tandem_kv_cache_usage_ratio", {200, VectorAnswer("0.625")});
  prom.Answer("tandem_requests_waiting", {200, VectorAnswer("7")});
  prom.Answer("tandem_inter_token_latency_seconds", {200, VectorAnswer("0.05")});
  prom.Answer("tandem_time_to_first_token_seconds", {200, VectorAnswer("1.5")});
  prom.Answer("tandem_prefill_tokens_waiting", {200, VectorAnswer("12000")});
  FakeClock clock(50'000'000'000);
  Pools pools;
  pools.Set({kDecode, kPrefill, kDecode});  // listed twice: queried once
  Rounds rounds;
  PrometheusSignalSourceOptions o;
  o.url = prom.url() + "/prom/";
  o.rate_window = "90s";
  o.timeout_ms = 2'000;
  o.pools = pools.Callback();
  o.on_round = rounds.Callback();
  o.clock = &clock;
  auto source = NewSource(o);
  ASSERT_NE(source, nullptr);
  EXPECT_FALSE(source->Latest(kDecode.pool_key).has_value());

  source->RunOnce();
  const std::optional<PoolSignalsSnapshot> d = source->Latest(kDecode.pool_key);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->signals.kv_cache_usage, 0.625);
  EXPECT_EQ(d->signals.waiting_requests, 7);
  EXPECT_EQ(d->signals.itl_p95_seconds, 0.05);
  EXPECT_FALSE(d->signals.ttft_p95_seconds || d->signals.waiting_prefill_tokens);  // not the decode's
  EXPECT_DOUBLE_EQ(d->scraped_at_seconds, 50);
  const std::optional<PoolSignalsSnapshot> p = source->Latest(kPrefill.pool_key);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->signals.ttft_p95_seconds, 1.5);
  EXPECT_EQ(p->signals.waiting_prefill_tokens, 12000);
  EXPECT_FALSE(p->signals.kv_cache_usage || p->signals.waiting_requests || p->signals.itl_p95_seconds);
  EXPECT_EQ(rounds.last(), (std::vector<std::string>{kDecode.pool_key, kPrefill.pool_key}));

  std::vector<std::string> queries = prom.queries();
  std::sort(queries.begin(), queries.end());
  EXPECT_EQ(
      queries,
      (std::vector<std::string>{
          R"(avg((tandem_kv_cache_usage_ratio{namespace="ml",deployment="llama",pool="decode"} >= 0) < +Inf))",
          "histogram_quantile(0.95, sum by (le) (rate(tandem_inter_token_latency_seconds_bucket{"
          "namespace=\"ml\",deployment=\"llama\",pool=\"router\"}[90s])))",
          "histogram_quantile(0.95, sum by (le) (rate(tandem_time_to_first_token_seconds_bucket{"
          "namespace=\"ml\",deployment=\"llama\",pool=\"router\"}[90s])))",
          R"(sum((tandem_prefill_tokens_waiting{namespace="ml",deployment="llama",pool="prefill"} >= 0) < +Inf))",
          R"(sum((tandem_requests_waiting{namespace="ml",deployment="llama",pool="decode"} >= 0) < +Inf))",
      }));
  const TinyRequest r = prom.requests().front();
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.target.rfind("/prom/api/v1/query?query=", 0), 0u) << r.target;
  EXPECT_EQ(Params(r.target)["timeout"], "2000ms");
  EXPECT_EQ(r.headers.at("accept"), "application/json");

  clock.AdvanceMillis(15'000);
  source->RunOnce();
  EXPECT_DOUBLE_EQ(source->Latest(kDecode.pool_key)->scraped_at_seconds, 65);
  EXPECT_LE(prom.connections(), 4);  // keep-alive: the workers' connections are reused
  const PrometheusQueryStats stats = source->stats();
  EXPECT_EQ(stats.rounds, 2u);
  EXPECT_EQ(stats.queries_ok, 10u);
  EXPECT_EQ(stats.queries_failed, 0u);
}

TEST(PrometheusSignalSource, CustomSelectorsReplaceTheDefaults) {
  FakePrometheus prom;
  Pools pools;
  pools.Set({{"ml/a-decode", {"ml", R"(we"ird)", "decode"}}});
  PrometheusSignalSourceOptions o;
  o.url = prom.url();
  o.selector = R"(kubernetes_namespace="{namespace}",app="{deployment}-{pool}")";
  o.latency_selector = R"(kubernetes_namespace="{namespace}",app="{deployment}-router")";
  o.pools = pools.Callback();
  auto source = NewSource(o);
  ASSERT_NE(source, nullptr);
  source->RunOnce();
  std::vector<std::string> queries = prom.queries();
  std::sort(queries.begin(), queries.end());
  ASSERT_EQ(queries.size(), 3u);
  EXPECT_NE(queries[0].find(R"({kubernetes_namespace="ml",app="we\"ird-decode"})"), std::string::npos)
      << queries[0];
  EXPECT_NE(queries[1].find(R"({kubernetes_namespace="ml",app="we\"ird-router"}[2m])"), std::string::npos)
      << queries[1];
  EXPECT_EQ(prom.requests().front().target.rfind("/api/v1/query?", 0), 0u);
}

TEST(PrometheusSignalSource, AnswersWithoutAValueAndFailedQueriesLeaveTheSignalAbsent) {
  FakePrometheus prom;
  prom.Answer("tandem_kv_cache_usage_ratio", {200, kEmptyAnswer});  // no series
  prom.Answer("tandem_requests_waiting", {200, VectorAnswer("NaN")});
  prom.Answer("tandem_inter_token_latency_seconds",
              {400, R"({"status":"error","errorType":"bad_data","error":"parse error"})"});
  prom.Answer("tandem_time_to_first_token_seconds", {200, VectorAnswer("-Inf")});
  prom.Answer("tandem_prefill_tokens_waiting", {200, "<html>proxy error</html>"});
  Pools pools;
  pools.Set({kDecode, kPrefill});
  PrometheusSignalSourceOptions o;
  o.url = prom.url();
  o.pools = pools.Callback();
  auto source = NewSource(o);
  ASSERT_NE(source, nullptr);
  source->RunOnce();
  const std::optional<PoolSignalsSnapshot> d = source->Latest(kDecode.pool_key);
  ASSERT_TRUE(d.has_value());  // a snapshot with every signal absent, never zeros
  EXPECT_FALSE(d->signals.kv_cache_usage || d->signals.waiting_requests || d->signals.itl_p95_seconds);
  const std::optional<PoolSignalsSnapshot> p = source->Latest(kPrefill.pool_key);
  ASSERT_TRUE(p.has_value());
  EXPECT_FALSE(p->signals.ttft_p95_seconds || p->signals.waiting_prefill_tokens);
  const PrometheusQueryStats stats = source->stats();
  EXPECT_EQ(stats.queries_ok, 3u);      // empty, NaN, -Inf: answered, no value
  EXPECT_EQ(stats.queries_failed, 2u);  // the 400 and the HTML

  // The same queries answering again bring the signals back.
  prom.Answer("tandem_inter_token_latency_seconds", {200, VectorAnswer("0.2")});
  source->RunOnce();
  EXPECT_EQ(source->Latest(kDecode.pool_key)->signals.itl_p95_seconds, 0.2);
}

TEST(PrometheusSignalSource, AnOversizedAnswerIsAFailedQuery) {
  FakePrometheus prom;
  std::string huge = VectorAnswer("0.5");
  huge.insert(huge.size() - 1, ",\"pad\":\"" + std::string(64 << 10, 'x') + "\"");
  prom.Answer("tandem_kv_cache_usage_ratio", {200, huge});
  prom.Answer("tandem_requests_waiting", {200, VectorAnswer("3")});
  Pools pools;
  pools.Set({kDecode});
  PrometheusSignalSourceOptions o;
  o.url = prom.url();
  o.max_answer_bytes = 32 << 10;
  o.pools = pools.Callback();
  auto source = NewSource(o);
  ASSERT_NE(source, nullptr);
  source->RunOnce();
  EXPECT_FALSE(source->Latest(kDecode.pool_key)->signals.kv_cache_usage.has_value());
  EXPECT_EQ(source->Latest(kDecode.pool_key)->signals.waiting_requests, 3);
  EXPECT_EQ(source->stats().queries_failed, 1u);
}

TEST(PrometheusSignalSource, ARefusingServerFailsEveryQuery) {
  std::string url;
  {
    FakePrometheus gone;
    url = gone.url();
  }
  Pools pools;
  pools.Set({kDecode});
  PrometheusSignalSourceOptions o;
  o.url = url;
  o.pools = pools.Callback();
  auto source = NewSource(o);
  ASSERT_NE(source, nullptr);
  source->RunOnce();
  ASSERT_TRUE(source->Latest(kDecode.pool_key).has_value());
  EXPECT_FALSE(source->Latest(kDecode.pool_key)->signals.kv_cache_usage.has_value());
  EXPECT_EQ(source->stats().queries_failed, 3u);
}

TEST(PrometheusSignalSource, ASlowServerCostsAboutOneTimeoutPerRound) {
  FakePrometheus prom;
  prom.Hang();
  Pools pools;
  pools.Set({kDecode, kPrefill, {"ml/other-decode", {"ml", "other", "decode"}}});  // 8 queries
  PrometheusSignalSourceOptions o;
  o.url = prom.url();
  o.timeout_ms = 400;
  o.max_concurrent_queries = 8;
  o.pools = pools.Callback();
  auto source = NewSource(o);
  ASSERT_NE(source, nullptr);
  const auto start = std::chrono::steady_clock::now();
  source->RunOnce();
  const double round_seconds = Seconds(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(round_seconds, 0.3);          // the queries were waited for, up to their deadline
  EXPECT_LT(round_seconds, 8 * 0.4 - 1);  // concurrently, not one after the other
  ASSERT_TRUE(source->Latest(kPrefill.pool_key).has_value());
  EXPECT_FALSE(source->Latest(kPrefill.pool_key)->signals.ttft_p95_seconds.has_value());
  EXPECT_EQ(source->stats().queries_failed, 8u);
}

TEST(PrometheusSignalSource, StopDuringASlowQueryReturnsPromptlyAndPublishesNothing) {
  FakePrometheus prom;
  prom.Hang();
  Pools pools;
  pools.Set({kDecode});
  Rounds rounds;
  PrometheusSignalSourceOptions o;
  o.url = prom.url();
  o.timeout_ms = 30'000;  // Stop() must not wait for it: it cancels the request
  o.pools = pools.Callback();
  o.on_round = rounds.Callback();
  auto source = NewSource(o);
  ASSERT_NE(source, nullptr);
  source->Start();
  ASSERT_TRUE(prom.WaitForRequests(1));
  const auto start = std::chrono::steady_clock::now();
  source->Stop();
  EXPECT_LT(Seconds(std::chrono::steady_clock::now() - start).count(), 5.0);
  EXPECT_FALSE(source->Latest(kDecode.pool_key).has_value());
  EXPECT_EQ(rounds.count(), 0);
  EXPECT_EQ(source->stats().rounds, 0u);

  // The destructor of a running source is as prompt.
  const size_t sent = prom.requests().size();
  source->Start();
  ASSERT_TRUE(prom.WaitForRequests(sent + 1));
  const auto again = std::chrono::steady_clock::now();
  source.reset();
  EXPECT_LT(Seconds(std::chrono::steady_clock::now() - again).count(), 5.0);
}

TEST(PrometheusSignalSource, LatestDoesNotWaitForARoundInFlight) {
  FakePrometheus prom;
  prom.Answer("tandem_kv_cache_usage_ratio", {200, VectorAnswer("0.25")});
  Pools pools;
  pools.Set({kDecode});
  PrometheusSignalSourceOptions o;
  o.url = prom.url();
  o.timeout_ms = 30'000;
  o.pools = pools.Callback();
  auto source = NewSource(o);
  ASSERT_NE(source, nullptr);
  source->RunOnce();
  prom.Hang();
  std::thread round([&] { source->RunOnce(); });
  ASSERT_TRUE(prom.WaitForRequests(4));
  const std::optional<PoolSignalsSnapshot> d = source->Latest(kDecode.pool_key);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->signals.kv_cache_usage, 0.25);
  EXPECT_EQ(source->stats().rounds, 1u);
  prom.Release();  // the server closes the connections without an answer: failed queries
  round.join();
  EXPECT_FALSE(source->Latest(kDecode.pool_key)->signals.kv_cache_usage.has_value());
}

TEST(PrometheusSignalSource, BackgroundRoundsFollowThePools) {
  FakePrometheus prom;
  prom.Answer("tandem_kv_cache_usage_ratio", {200, VectorAnswer("0.5")});
  Pools pools;
  pools.Set({kDecode, kPrefill, {"ml/router", {"ml", "llama", "router"}}});  // a role with no signals
  Rounds rounds;
  PrometheusSignalSourceOptions o;
  o.url = prom.url();
  o.interval_ms = 10;
  o.pools = pools.Callback();
  o.on_round = rounds.Callback();
  auto source = NewSource(o);
  ASSERT_NE(source, nullptr);
  source->Start();
  ASSERT_TRUE(rounds.WaitFor(0, {kDecode.pool_key, kPrefill.pool_key, "ml/router"}));
  EXPECT_EQ(source->Latest(kDecode.pool_key)->signals.kv_cache_usage, 0.5);
  ASSERT_TRUE(source->Latest("ml/router").has_value());  // listed: a snapshot, with nothing in it

  pools.Set({kDecode});
  ASSERT_TRUE(rounds.WaitFor(rounds.count(), {kDecode.pool_key}));
  EXPECT_FALSE(source->Latest(kPrefill.pool_key).has_value());
  source->Stop();
  const int stopped_at = rounds.count();
  source->Start();  // restartable
  ASSERT_TRUE(rounds.WaitFor(stopped_at, {kDecode.pool_key}));
  source->Stop();

  pools.Set({});
  source->RunOnce();
  EXPECT_TRUE(rounds.last().empty());
  EXPECT_FALSE(source->Latest(kDecode.pool_key).has_value());
}

TEST(PrometheusSignalSource, NewRefusesBadOptions) {
  PrometheusSignalSourceOptions o;
  o.url = "prometheus:9090";
  EXPECT_EQ(PrometheusSignalSource::New(o).status().code(), StatusCode::kInvalidArgument);
  o.url = "http://prometheus:9090";
  EXPECT_TRUE(PrometheusSignalSource::New(o).ok());
  o.selector = R"(namespace="{ns}")";
  EXPECT_NE(PrometheusSignalSource::New(o).status().message().find("selector"), std::string::npos);
  o.selector = std::string(kDefaultPromSelector);
  o.latency_selector = "";
  EXPECT_NE(PrometheusSignalSource::New(o).status().message().find("latency selector"), std::string::npos);
  o.latency_selector = std::string(kDefaultPromLatencySelector);
  o.rate_window = "2";
  EXPECT_NE(PrometheusSignalSource::New(o).status().message().find("rate window"), std::string::npos);
}

}  // namespace
}  // namespace tandem::controller::autoscale
