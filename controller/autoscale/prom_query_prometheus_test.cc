// PrometheusSignalSource against the real `prometheus` binary (Debian package prometheus): it
// scrapes a fake agent on loopback whose exposition we write (the agents' label layout, histogram
// counters that grow with each scrape), and the source's queries must come back with the values
// that exposition implies. This proves the PromQL is valid and means what prom_api.h says.
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "controller/autoscale/prom_query.h"
#include "controller/kube/testing/tiny_http_server.h"

namespace tandem::controller::autoscale {
namespace {

using kube::testing::TinyConnection;
using kube::testing::TinyHttpServer;
using kube::testing::TinyRequest;

// The agents' series for deployment "llama" (pool decode, prefill and the router), a decoy
// deployment, and gauges that must be filtered out (NaN, +Inf, negative). Every scrape adds 100
// inter-token latencies (90 <= 10 ms, 10 in (0.1, 1]: p95 0.55) and 100 first tokens in (1, 2.5]
// (p95 2.425) at the router.
std::string Exposition(int scrape) {
  const auto n = [&](int per_scrape) { return std::to_string(per_scrape * scrape); };
  const std::string decode = R"(deployment="llama",pool="decode",role="decode")";
  const std::string prefill = R"(deployment="llama",pool="prefill",role="prefill")";
  const std::string router = R"(deployment="llama",pool="router",role="router")";
  std::ostringstream o;
  o << "# TYPE tandem_kv_cache_usage_ratio gauge\n"
    << "tandem_kv_cache_usage_ratio{" << decode << ",pod=\"a\"} 0.2\n"
    << "tandem_kv_cache_usage_ratio{" << decode << ",pod=\"b\"} 0.6\n"
    << "tandem_kv_cache_usage_ratio{" << decode << ",pod=\"nan\"} NaN\n"
    << "tandem_kv_cache_usage_ratio{" << decode << ",pod=\"inf\"} +Inf\n"
    << "tandem_kv_cache_usage_ratio{" << decode << ",pod=\"neg\"} -1\n"
    << "tandem_kv_cache_usage_ratio{deployment=\"other\",pool=\"decode\",role=\"decode\"} 0.99\n"
    << "# TYPE tandem_requests_waiting gauge\n"
    << "tandem_requests_waiting{" << decode << ",pod=\"a\"} 3\n"
    << "tandem_requests_waiting{" << decode << ",pod=\"b\"} 4\n"
    << "tandem_requests_waiting{" << decode << ",pod=\"neg\"} -2\n"
    << "tandem_requests_waiting{" << router << "} 0\n"
    << "# TYPE tandem_prefill_tokens_waiting gauge\n"
    << "tandem_prefill_tokens_waiting{" << prefill << ",pod=\"a\"} 500\n"
    << "tandem_prefill_tokens_waiting{" << prefill << ",pod=\"b\"} 700\n"
    << "# TYPE tandem_inter_token_latency_seconds histogram\n"
    << "tandem_inter_token_latency_seconds_bucket{" << router << ",le=\"0.01\"} " << n(90) << "\n"
    << "tandem_inter_token_latency_seconds_bucket{" << router << ",le=\"0.1\"} " << n(90) << "\n"
    << "tandem_inter_token_latency_seconds_bucket{" << router << ",le=\"1\"} " << n(100) << "\n"
    << "tandem_inter_token_latency_seconds_bucket{" << router << ",le=\"+Inf\"} " << n(100) << "\n"
    << "tandem_inter_token_latency_seconds_sum{" << router << "} " << n(5) << "\n"
    << "tandem_inter_token_latency_seconds_count{" << router << "} " << n(100) << "\n"
    << "# TYPE tandem_time_to_first_token_seconds histogram\n"
    << "tandem_time_to_first_token_seconds_bucket{" << router << ",le=\"1\"} 0\n"
    << "tandem_time_to_first_token_seconds_bucket{" << router << ",le=\"2.5\"} " << n(100) << "\n"
    << "tandem_time_to_first_token_seconds_bucket{" << router << ",le=\"+Inf\"} " << n(100) << "\n"
    << "tandem_time_to_first_token_seconds_sum{" << router << "} " << n(200) << "\n"
    << "tandem_time_to_first_token_seconds_count{" << router << "} " << n(100) << "\n";
  return o.str();
}

// A fake agent: each GET /metrics is one more scrape.
class FakeAgent {
 public:
  FakeAgent()
      : server_([this](const TinyRequest&, TinyConnection& c) {
          int scrape;
          {
            std::lock_guard<std::mutex> lock(mu_);
            scrape = ++scrapes_;
          }
          c.Respond(200, Exposition(scrape), "");
        }) {}
  int port() const { return server_.port(); }

 private:
  std::mutex mu_;
  int scrapes_ = 0;
  TinyHttpServer server_;
};

int FreePort() {
  TinyHttpServer probe([](const TinyRequest&, TinyConnection&) {});
  return probe.port();
}

// `prometheus` in a temporary directory, scraping one target every 250 ms.
class PrometheusProcess {
 public:
  PrometheusProcess(int target_port) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tandem-prom-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) return;
    dir_ = tmpl;
    port_ = FreePort();
    std::ofstream(dir_ + "/prometheus.yml")
        << "global: {scrape_interval: 250ms, scrape_timeout: 200ms, evaluation_interval: 1s}\n"
        << "scrape_configs:\n- job_name: tandem\n  static_configs:\n"
        << "  - targets: ['127.0.0.1:" << target_port << "']\n    labels: {namespace: ml}\n";
    std::vector<std::string> args = {TANDEM_PROMETHEUS, "--config.file=" + dir_ + "/prometheus.yml",
                                     "--storage.tsdb.path=" + dir_ + "/data",
                                     "--web.listen-address=127.0.0.1:" + std::to_string(port_)};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int log_fd =
        ::open((dir_ + "/prometheus.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(log_fd, 1);
      ::dup2(log_fd, 2);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(log_fd);
  }
  ~PrometheusProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);  // its data directory is thrown away: no need for a clean shutdown
      ::waitpid(pid_, nullptr, 0);
    }
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  bool started() const { return pid_ > 0; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string Log() const {
    std::ifstream in(dir_ + "/prometheus.log");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return text.size() > 4000 ? text.substr(text.size() - 4000) : text;
  }

 private:
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// Lets the test wait, round after round, for a condition on the source.
class Rounds {
 public:
  std::function<void(const std::vector<std::string>&)> Callback() {
    return [this](const std::vector<std::string>&) {
      std::lock_guard<std::mutex> lock(mu_);
      ++count_;
      cv_.notify_all();
    };
  }
  bool WaitUntil(const std::function<bool()>& done, std::chrono::seconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, limit, done);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int count_ = 0;
};

bool Complete(const std::optional<PoolSignalsSnapshot>& s, bool decode) {
  if (!s) return false;
  return decode ? s->signals.kv_cache_usage && s->signals.waiting_requests && s->signals.itl_p95_seconds
                : s->signals.ttft_p95_seconds && s->signals.waiting_prefill_tokens;
}

TEST(PrometheusSignalSourceReal, QueriesARealPrometheusScrapingAnAgent) {
  FakeAgent agent;
  PrometheusProcess prom(agent.port());
  ASSERT_TRUE(prom.started());
  Rounds rounds;
  PrometheusSignalSourceOptions o;
  o.url = prom.url();
  o.rate_window = "5s";  // 20 scrapes at 250 ms
  o.interval_ms = 250;
  o.timeout_ms = 2'000;
  o.pools = [] {
    return std::vector<PoolQueryTarget>{{"ml/llama-decode", {"ml", "llama", "decode"}},
                                        {"ml/llama-prefill", {"ml", "llama", "prefill"}},
                                        {"ml/absent-decode", {"ml", "absent", "decode"}}};
  };
  o.on_round = rounds.Callback();
  auto source = PrometheusSignalSource::New(o);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  (*source)->Start();
  const bool complete = rounds.WaitUntil(
      [&] {
        return Complete((*source)->Latest("ml/llama-decode"), true) &&
               Complete((*source)->Latest("ml/llama-prefill"), false);
      },
      std::chrono::seconds(60));
  (*source)->Stop();
  ASSERT_TRUE(complete) << "queries ok " << (*source)->stats().queries_ok << ", failed "
                        << (*source)->stats().queries_failed << "\n"
                        << prom.Log();

  const PoolSignalsSnapshot d = *(*source)->Latest("ml/llama-decode");
  EXPECT_NEAR(*d.signals.kv_cache_usage, 0.4, 1e-9);  // NaN, +Inf, -1 and the other deployment left out
  EXPECT_NEAR(*d.signals.waiting_requests, 7, 1e-9);
  EXPECT_NEAR(*d.signals.itl_p95_seconds, 0.1 + 0.9 * (95.0 - 90) / 10, 1e-6);
  const PoolSignalsSnapshot p = *(*source)->Latest("ml/llama-prefill");
  EXPECT_NEAR(*p.signals.ttft_p95_seconds, 1 + 1.5 * 0.95, 1e-6);
  EXPECT_NEAR(*p.signals.waiting_prefill_tokens, 1200, 1e-9);
  // A deployment with no series: every query answered, every signal absent.
  const PoolSignalsSnapshot a = *(*source)->Latest("ml/absent-decode");
  EXPECT_FALSE(a.signals.kv_cache_usage || a.signals.waiting_requests || a.signals.itl_p95_seconds);

  // A selector Prometheus refuses (a bad regex) is a failed query, not an absent-but-fine one.
  o.selector = R"(namespace=~"({namespace}")";
  o.on_round = nullptr;
  auto broken = PrometheusSignalSource::New(o);
  ASSERT_TRUE(broken.ok());
  (*broken)->RunOnce();
  // kv and waiting of both decode pools, the prefill pool's waiting tokens; the latency queries
  // have their own selector.
  EXPECT_EQ((*broken)->stats().queries_failed, 5u);
  EXPECT_NEAR((*broken)->Latest("ml/llama-decode")->signals.itl_p95_seconds.value_or(-1), 0.55, 1e-6);
}

}  // namespace
}  // namespace tandem::controller::autoscale
