#include "controller/autoscale/prom_query.h"

#include <algorithm>
#include <atomic>
#include <chrono>

#include "common/logging.h"

namespace tandem::controller::autoscale {
namespace {

// The first entry of each pool key: a pool listed twice is queried once.
std::vector<PoolQueryTarget> Dedupe(std::vector<PoolQueryTarget> pools) {
  std::set<std::string> seen;
  std::vector<PoolQueryTarget> out;
  out.reserve(pools.size());
  for (PoolQueryTarget& p : pools) {
    if (seen.insert(p.pool_key).second) out.push_back(std::move(p));
  }
  return out;
}

void Set(reconcile::AutoscaleSignals* s, PoolSignal signal, double value) {
  switch (signal) {
    case PoolSignal::kKvCacheUsage: s->kv_cache_usage = value; break;
    case PoolSignal::kWaitingRequests: s->waiting_requests = value; break;
    case PoolSignal::kItlP95: s->itl_p95_seconds = value; break;
    case PoolSignal::kTtftP95: s->ttft_p95_seconds = value; break;
    case PoolSignal::kWaitingPrefillTokens: s->waiting_prefill_tokens = value; break;
  }
}

}  // namespace

StatusOr<std::unique_ptr<PrometheusSignalSource>> PrometheusSignalSource::New(
    PrometheusSignalSourceOptions options) {
  ASSIGN_OR_RETURN(PromServerUrl url, ParsePromServerUrl(options.url));
  RETURN_IF_ERROR(CheckSelectorTemplate(options.selector).WithContext("selector"));
  RETURN_IF_ERROR(CheckSelectorTemplate(options.latency_selector).WithContext("latency selector"));
  RETURN_IF_ERROR(ParsePromDurationMs(options.rate_window).status().WithContext("rate window"));
  kube::HttpClientOptions o;
  o.server = url.server;
  o.user_agent = "tandem-controller/autoscaler";
  o.connect_timeout_ms = options.timeout_ms;
  o.request_timeout_ms = options.timeout_ms;
  o.max_idle_connections = std::max(options.max_concurrent_queries, 1);
  o.max_body_bytes = options.max_answer_bytes;
  ASSIGN_OR_RETURN(std::unique_ptr<kube::HttpClient> client, kube::HttpClient::New(std::move(o)));
  return std::unique_ptr<PrometheusSignalSource>(
      new PrometheusSignalSource(std::move(options), std::move(url), std::move(client)));
}

PrometheusSignalSource::PrometheusSignalSource(PrometheusSignalSourceOptions options, PromServerUrl url,
                                               std::unique_ptr<kube::HttpClient> client)
    : options_(std::move(options)),
      url_(std::move(url)),
      clock_(options_.clock != nullptr ? *options_.clock : SteadyClock::Default()),
      client_(std::move(client)),
      cancel_(std::make_shared<kube::CancelToken>()) {}

PrometheusSignalSource::~PrometheusSignalSource() { Stop(); }

void PrometheusSignalSource::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this, cancel = cancel_] { Loop(cancel); });
}

void PrometheusSignalSource::Stop() {
  std::thread thread;
  std::shared_ptr<kube::CancelToken> cancel;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    thread = std::move(thread_);
    cancel = cancel_;
  }
  stop_cv_.notify_all();
  cancel->Cancel();  // aborts the queries in flight, in a background round or a RunOnce()
  if (thread.joinable()) thread.join();
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = false;
  cancel_ = std::make_shared<kube::CancelToken>();
}

void PrometheusSignalSource::RunOnce() {
  std::shared_ptr<kube::CancelToken> cancel;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancel = cancel_;
  }
  RunRound(*cancel);
}

std::optional<PoolSignalsSnapshot> PrometheusSignalSource::Latest(const std::string& pool_key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = snapshots_.find(pool_key);
  if (it == snapshots_.end()) return std::nullopt;
  return it->second;
}

PrometheusQueryStats PrometheusSignalSource::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void PrometheusSignalSource::Loop(std::shared_ptr<kube::CancelToken> cancel) {
  const auto interval = std::chrono::milliseconds(std::max<int64_t>(options_.interval_ms, 1));
  for (;;) {
    const auto started = std::chrono::steady_clock::now();
    RunRound(*cancel);
    std::unique_lock<std::mutex> lock(mu_);
    if (stop_cv_.wait_until(lock, started + interval, [this] { return stopping_; })) return;
  }
}

void PrometheusSignalSource::RunRound(kube::CancelToken& cancel) {
  std::lock_guard<std::mutex> round_lock(round_mu_);
  if (cancel.cancelled()) return;
  const std::vector<PoolQueryTarget> pools =
      Dedupe(options_.pools ? options_.pools() : std::vector<PoolQueryTarget>());
  const std::vector<Query> queries = PlanQueries(pools);
  const std::vector<Outcome> outcomes = RunAll(queries, cancel);
  if (cancel.cancelled()) return;  // cut short by Stop(): publish nothing
  const double now_seconds = clock_.NowSeconds();
  LogTransitions(pools, queries, outcomes);

  std::vector<PoolSignalsSnapshot> per_pool(pools.size());
  PrometheusQueryStats round;
  for (size_t i = 0; i < queries.size(); ++i) {
    const Outcome& o = outcomes[i];
    ++(o.status.ok() ? round.queries_ok : round.queries_failed);
    if (o.status.ok() && o.value) Set(&per_pool[queries[i].pool].signals, queries[i].signal, *o.value);
  }
  std::map<std::string, PoolSignalsSnapshot> snapshots;
  for (size_t p = 0; p < pools.size(); ++p) {
    per_pool[p].scraped_at_seconds = now_seconds;
    snapshots.emplace(pools[p].pool_key, per_pool[p]);
  }
  std::vector<std::string> pool_keys;
  pool_keys.reserve(snapshots.size());
  for (const auto& entry : snapshots) pool_keys.push_back(entry.first);
  {
    std::lock_guard<std::mutex> lock(mu_);
    snapshots_ = std::move(snapshots);
    ++stats_.rounds;
    stats_.queries_ok += round.queries_ok;
    stats_.queries_failed += round.queries_failed;
  }
  if (options_.on_round) options_.on_round(pool_keys);
}

std::vector<PrometheusSignalSource::Query> PrometheusSignalSource::PlanQueries(
    const std::vector<PoolQueryTarget>& pools) const {
  std::vector<Query> queries;
  for (size_t p = 0; p < pools.size(); ++p) {
    const std::string selector = ExpandSelector(options_.selector, pools[p].labels);
    const std::string latency_selector = ExpandSelector(options_.latency_selector, pools[p].labels);
    for (PoolSignal signal : SignalsForRole(pools[p].labels.pool)) {
      queries.push_back(
          {p, signal,
           SignalQuery(signal, IsLatencySignal(signal) ? latency_selector : selector, options_.rate_window)});
    }
  }
  return queries;
}

std::vector<PrometheusSignalSource::Outcome> PrometheusSignalSource::RunAll(const std::vector<Query>& queries,
                                                                            kube::CancelToken& cancel) {
  std::vector<Outcome> outcomes(queries.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < queries.size();) outcomes[i] = RunOne(queries[i], cancel);
  };
  const size_t workers =
      std::min(queries.size(), static_cast<size_t>(std::max(options_.max_concurrent_queries, 1)));
  std::vector<std::thread> threads;
  for (size_t w = 1; w < workers; ++w) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  return outcomes;
}

PrometheusSignalSource::Outcome PrometheusSignalSource::RunOne(const Query& query,
                                                               kube::CancelToken& cancel) {
  Outcome out;
  if (cancel.cancelled()) {
    out.status = Status::Cancelled("the Prometheus signal source is stopping");
    return out;
  }
  kube::HttpRequest request;
  request.method = "GET";
  // Prometheus abandons the evaluation at its own ?timeout= too, not only when we hang up.
  request.target = url_.path_prefix + "/api/v1/query?query=" + UrlQueryEscape(query.promql) +
                   "&timeout=" + std::to_string(std::max<int64_t>(options_.timeout_ms, 1)) + "ms";
  request.headers = {{"Accept", "application/json"}};
  request.timeout_ms = options_.timeout_ms;
  request.cancel = &cancel;
  StatusOr<kube::HttpResponse> response = client_->Do(request);
  if (!response.ok()) {
    out.status = response.status();
    return out;
  }
  StatusOr<std::optional<double>> value =
      ParseInstantAnswer(response->status, response->body, options_.max_answer_bytes);
  if (!value.ok()) {
    out.status = value.status();
    return out;
  }
  out.value = *value;
  return out;
}

void PrometheusSignalSource::LogTransitions(const std::vector<PoolQueryTarget>& pools,
                                            const std::vector<Query>& queries,
                                            const std::vector<Outcome>& outcomes) {
  // One line per change of state, not per query: a Prometheus that is down fails them all.
  std::set<std::pair<std::string, PoolSignal>> failing;
  size_t newly_failing = 0;
  const Query* example = nullptr;
  const Status* example_status = nullptr;
  for (size_t i = 0; i < queries.size(); ++i) {
    if (outcomes[i].status.ok()) continue;
    const std::pair<std::string, PoolSignal> key(pools[queries[i].pool].pool_key, queries[i].signal);
    failing.insert(key);
    if (failing_.count(key) != 0) continue;
    if (newly_failing++ == 0) {
      example = &queries[i];
      example_status = &outcomes[i].status;
    }
  }
  if (newly_failing > 0) {
    TANDEM_LOG(Warning) << "autoscaler: " << newly_failing << " Prometheus quer"
                        << (newly_failing == 1 ? "y" : "ies") << " at " << url_.server << url_.path_prefix
                        << " began failing (their signals are absent), e.g. pool "
                        << pools[example->pool].pool_key << " " << PoolSignalName(example->signal) << ": "
                        << example_status->ToString() << "; query: " << example->promql;
  } else if (failing.empty() && !failing_.empty()) {
    TANDEM_LOG(Info) << "autoscaler: the Prometheus queries at " << url_.server << url_.path_prefix
                     << " answer again";
  }
  failing_ = std::move(failing);
}

}  // namespace tandem::controller::autoscale
