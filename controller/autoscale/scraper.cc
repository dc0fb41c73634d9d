#include "controller/autoscale/scraper.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>

#include "common/logging.h"

namespace tandem::controller::autoscale {
namespace {

// The first entry of each (pool, pod): a target listed twice is scraped and counted once.
std::vector<PodTarget> Dedupe(std::vector<PodTarget> targets) {
  std::set<std::pair<std::string, std::string>> seen;
  std::vector<PodTarget> out;
  out.reserve(targets.size());
  for (PodTarget& t : targets) {
    if (seen.emplace(t.pool_key, t.pod).second) out.push_back(std::move(t));
  }
  return out;
}

// "host:port" as a pod's status gives it (IPv4, [IPv6], a DNS name): nothing that could smuggle a
// path, credentials or a header into the request.
Status CheckAddress(const std::string& address) {
  const bool ok = !address.empty() && address.size() <= 256 &&
                  std::all_of(address.begin(), address.end(), [](unsigned char c) {
                    return std::isalnum(c) || c == '.' || c == ':' || c == '-' || c == '[' || c == ']';
                  });
  if (!ok)
    return Status::InvalidArgument("metrics address \"" + address.substr(0, 64) + "\" is not host:port");
  return Status::Ok();
}

}  // namespace

PodMetricsScraper::PodMetricsScraper(PodMetricsScraperOptions options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : SteadyClock::Default()),
      cancel_(std::make_shared<kube::CancelToken>()) {}

PodMetricsScraper::~PodMetricsScraper() { Stop(); }

void PodMetricsScraper::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this, cancel = cancel_] { Loop(cancel); });
}

void PodMetricsScraper::Stop() {
  std::thread thread;
  std::shared_ptr<kube::CancelToken> cancel;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    thread = std::move(thread_);
    cancel = cancel_;
  }
  stop_cv_.notify_all();
  cancel->Cancel();  // aborts the requests in flight, in a background round or a RunOnce()
  if (thread.joinable()) thread.join();
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = false;
  cancel_ = std::make_shared<kube::CancelToken>();
}

void PodMetricsScraper::RunOnce() {
  std::shared_ptr<kube::CancelToken> cancel;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancel = cancel_;
  }
  RunRound(*cancel);
}

std::optional<PoolSignalsSnapshot> PodMetricsScraper::Latest(const std::string& pool_key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = snapshots_.find(pool_key);
  if (it == snapshots_.end()) return std::nullopt;
  return it->second;
}

ScraperStats PodMetricsScraper::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void PodMetricsScraper::Loop(std::shared_ptr<kube::CancelToken> cancel) {
  const auto interval = std::chrono::milliseconds(std::max<int64_t>(options_.interval_ms, 1));
  for (;;) {
    const auto started = std::chrono::steady_clock::now();
    RunRound(*cancel);
    std::unique_lock<std::mutex> lock(mu_);
    if (stop_cv_.wait_until(lock, started + interval, [this] { return stopping_; })) return;
  }
}

void PodMetricsScraper::RunRound(kube::CancelToken& cancel) {
  std::lock_guard<std::mutex> round_lock(round_mu_);
  if (cancel.cancelled()) return;
  const std::vector<PodTarget> targets =
      Dedupe(options_.targets ? options_.targets() : std::vector<PodTarget>());
  SyncClients(targets);
  std::vector<ScrapeResult> results = ScrapeAll(targets, cancel);
  if (cancel.cancelled()) return;  // cut short by Stop(): publish nothing, keep the counters as they were
  const double now_seconds = clock_.NowSeconds();
  LogTransitions(targets, results);

  std::map<std::string, std::vector<size_t>> by_pool;
  for (size_t i = 0; i < targets.size(); ++i) by_pool[targets[i].pool_key].push_back(i);
  std::map<std::string, PoolSignalsSnapshot> snapshots;
  ScraperStats round;
  for (const auto& [pool_key, indices] : by_pool) {
    PoolSignalsSnapshot snapshot;
    snapshot.scraped_at_seconds = now_seconds;
    std::vector<MemberScrape> members;
    for (size_t i : indices) {
      const bool ok = results[i].status.ok();
      members.push_back({targets[i].pod, ok ? &results[i].samples : nullptr, targets[i].latency_only});
      ++(ok ? snapshot.pods_scraped : snapshot.pods_failed);
    }
    snapshot.signals = AggregatePoolSignals(members, &counters_[pool_key]);
    round.pods_scraped += static_cast<uint64_t>(snapshot.pods_scraped);
    round.pods_failed += static_cast<uint64_t>(snapshot.pods_failed);
    snapshots.emplace(pool_key, snapshot);
  }
  std::erase_if(counters_, [&](const auto& entry) { return by_pool.count(entry.first) == 0; });

  std::vector<std::string> pool_keys;
  pool_keys.reserve(snapshots.size());
  for (const auto& entry : snapshots) pool_keys.push_back(entry.first);
  {
    std::lock_guard<std::mutex> lock(mu_);
    snapshots_ = std::move(snapshots);
    ++stats_.rounds;
    stats_.pods_scraped += round.pods_scraped;
    stats_.pods_failed += round.pods_failed;
  }
  if (options_.on_round) options_.on_round(pool_keys);
}

void PodMetricsScraper::SyncClients(const std::vector<PodTarget>& targets) {
  std::set<std::string> addresses;
  for (const PodTarget& t : targets) addresses.insert(t.address);
  std::erase_if(clients_, [&](const auto& entry) { return addresses.count(entry.first) == 0; });
  std::erase_if(client_errors_, [&](const auto& entry) { return addresses.count(entry.first) == 0; });
  for (const std::string& address : addresses) {
    if (clients_.count(address) != 0 || client_errors_.count(address) != 0) continue;
    if (Status s = CheckAddress(address); !s.ok()) {
      client_errors_.emplace(address, s);
      continue;
    }
    kube::HttpClientOptions o;
    o.server = "http://" + address;
    o.user_agent = "tandem-controller/autoscaler";
    o.connect_timeout_ms = options_.timeout_ms;
    o.request_timeout_ms = options_.timeout_ms;
    o.max_idle_connections = 1;                         // one round asks each address once
    o.max_body_bytes = options_.limits.max_body_bytes;  // a bigger body is refused unread
    StatusOr<std::unique_ptr<kube::HttpClient>> client = kube::HttpClient::New(std::move(o));
    if (client.ok()) {
      clients_.emplace(address, std::move(client).value());
    } else {
      client_errors_.emplace(address, client.status());
    }
  }
}

std::vector<PodMetricsScraper::ScrapeResult> PodMetricsScraper::ScrapeAll(
    const std::vector<PodTarget>& targets, kube::CancelToken& cancel) {
  std::vector<ScrapeResult> results(targets.size());
  // One request per address: a router is a target of both its deployment's pools.
  std::vector<size_t> first(targets.size());
  std::vector<size_t> unique;
  std::map<std::string, size_t> by_address;
  for (size_t i = 0; i < targets.size(); ++i) {
    auto [it, added] = by_address.emplace(targets[i].address, i);
    first[i] = it->second;
    if (added) unique.push_back(i);
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k; (k = next.fetch_add(1)) < unique.size();) {
      results[unique[k]] = ScrapeOne(targets[unique[k]], cancel);
    }
  };
  const size_t workers =
      std::min(unique.size(), static_cast<size_t>(std::max(options_.max_concurrent_scrapes, 1)));
  std::vector<std::thread> threads;
  for (size_t w = 1; w < workers; ++w) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < targets.size(); ++i) {
    if (first[i] != i) results[i] = results[first[i]];
  }
  return results;
}

PodMetricsScraper::ScrapeResult PodMetricsScraper::ScrapeOne(const PodTarget& target,
                                                             kube::CancelToken& cancel) {
  ScrapeResult r;
  if (cancel.cancelled()) {
    r.status = Status::Cancelled("the scraper is stopping");
    return r;
  }
  auto client = clients_.find(target.address);  // read-only while the round's workers run
  if (client == clients_.end()) {
    r.status = client_errors_.at(target.address);
    return r;
  }
  kube::HttpRequest request;
  request.method = "GET";
  request.target = options_.path;
  request.headers = {{"Accept", "text/plain;version=0.0.4;q=1,*/*;q=0.1"}};
  request.timeout_ms = options_.timeout_ms;
  request.cancel = &cancel;
  StatusOr<kube::HttpResponse> response = client->second->Do(request);
  if (!response.ok()) {
    r.status = response.status().WithContext("GET " + options_.path);
    return r;
  }
  if (response->status != 200) {
    r.status = Status::Unavailable("GET " + options_.path + ": HTTP " + std::to_string(response->status));
    return r;
  }
  StatusOr<std::vector<PromSample>> samples =
      ParsePromText(response->body, options_.limits, IsPoolSignalSample);
  if (!samples.ok()) {
    r.status = samples.status().WithContext("parsing " + options_.path);
    return r;
  }
  r.samples = std::move(samples).value();
  return r;
}

void PodMetricsScraper::LogTransitions(const std::vector<PodTarget>& targets,
                                       const std::vector<ScrapeResult>& results) {
  std::set<std::pair<std::string, std::string>> failing;
  for (size_t i = 0; i < targets.size(); ++i) {
    const PodTarget& t = targets[i];
    const std::pair<std::string, std::string> key(t.pool_key, t.pod);
    const bool was_failing = failing_.count(key) != 0;
    if (!results[i].status.ok()) {
      failing.insert(key);
      if (!was_failing) {
        TANDEM_LOG(Warning) << "autoscaler: scraping pod " << t.pod << " of pool " << t.pool_key << " at "
                            << t.address << ": " << results[i].status.ToString();
      }
    } else if (was_failing) {
      TANDEM_LOG(Info) << "autoscaler: pod " << t.pod << " of pool " << t.pool_key << " answers again";
    }
  }
  failing_ = std::move(failing);
}

}  // namespace tandem::controller::autoscale
