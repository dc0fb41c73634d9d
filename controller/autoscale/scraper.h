#pragma once
// PodMetricsScraper: the SignalSource of the built-in autoscaler. A background thread, every
// interval, asks for the pools' targets (members, and their deployments' routers for latency),
// GETs http://<address>/metrics from each address once (concurrently, at most
// max_concurrent_scrapes at a time, each bounded by timeout_ms including the connect), parses
// the bodies (prom_text.h), aggregates each pool (pool_signals.h) and stores one snapshot per pool.
// Latest() only reads the stored snapshots under a mutex: it never waits on the network.
//
// A member that fails (refused, timeout, non-200 status, unparseable body) counts in pods_failed
// and contributes nothing: its signals are absent, not 0. A pool whose members all fail still gets
// a snapshot (every signal absent); a pool with no member in a round loses its snapshot.
//
// Thread-safe. Rounds never overlap: RunOnce() waits for a background round in progress.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "controller/autoscale/pool_signals.h"
#include "controller/autoscale/prom_text.h"
#include "controller/autoscale/signals.h"
#include "controller/kube/cancel.h"
#include "controller/kube/http_client.h"

namespace tandem::controller::autoscale {

struct PodMetricsScraperOptions {
  int64_t interval_ms = 15'000;  // from one round's start to the next's (back to back when longer)
  int64_t timeout_ms = 1'000;    // one pod's whole request: connect, send, headers and body
  int max_concurrent_scrapes = 16;
  std::string path = "/metrics";
  // The members to scrape this round (the informer cache's ready pods with an IP). Called on the
  // scraper's thread at the start of each round; must not block. Empty: nothing to scrape.
  std::function<std::vector<PodTarget>()> targets;
  // Called after each round, on the round's thread, with the pools that got a snapshot (sorted).
  // May be empty. Must not call RunOnce() or Stop().
  std::function<void(const std::vector<std::string>& pool_keys)> on_round;
  // For scraped_at_seconds; null: SteadyClock::Default(). Not owned; must outlive the scraper.
  const Clock* clock = nullptr;
  PromParseLimits limits;
};

// Totals since construction (what a metrics hook would export).
struct ScraperStats {
  uint64_t rounds = 0;        // rounds that published snapshots
  uint64_t pods_scraped = 0;  // targets that answered with a parseable body (a router counts per pool)
  uint64_t pods_failed = 0;   // targets that did not
};

class PodMetricsScraper final : public SignalSource {
 public:
  explicit PodMetricsScraper(PodMetricsScraperOptions options);
  // Stops the background thread.
  ~PodMetricsScraper() override;
  PodMetricsScraper(const PodMetricsScraper&) = delete;
  PodMetricsScraper& operator=(const PodMetricsScraper&) = delete;

  // Starts the background rounds (the first at once). No-op when already started.
  void Start();
  // Cancels the requests in flight, waits for the background thread and returns; a round cut
  // short publishes nothing. Returns within about timeout_ms even while a pod is being scraped.
  // Start() may be called again afterwards. No-op when not started.
  void Stop();
  // One round on the calling thread (tests; also usable without Start()). A Stop() during it
  // cancels it.
  void RunOnce();

  std::optional<PoolSignalsSnapshot> Latest(const std::string& pool_key) const override;
  ScraperStats stats() const;

 private:
  struct ScrapeResult {
    Status status;
    std::vector<PromSample> samples;
  };

  void Loop(std::shared_ptr<kube::CancelToken> cancel);
  void RunRound(kube::CancelToken& cancel);
  // Keeps one client per address of `targets` (created when missing, dropped when untargeted).
  void SyncClients(const std::vector<PodTarget>& targets);
  std::vector<ScrapeResult> ScrapeAll(const std::vector<PodTarget>& targets, kube::CancelToken& cancel);
  ScrapeResult ScrapeOne(const PodTarget& target, kube::CancelToken& cancel);
  void LogTransitions(const std::vector<PodTarget>& targets, const std::vector<ScrapeResult>& results);

  const PodMetricsScraperOptions options_;
  const Clock& clock_;

  std::mutex round_mu_;  // held for a whole round; guards the members below up to mu_
  std::map<std::string, std::unique_ptr<kube::HttpClient>> clients_;  // by address
  std::map<std::string, Status> client_errors_;                       // addresses no client accepts
  std::map<std::string, PoolCounters> counters_;                      // by pool key
  std::set<std::pair<std::string, std::string>> failing_;             // (pool key, pod) failing now

  mutable std::mutex mu_;  // guards the members below
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread thread_;
  std::shared_ptr<kube::CancelToken> cancel_;  // the current rounds'; replaced after Stop()
  std::map<std::string, PoolSignalsSnapshot> snapshots_;
  ScraperStats stats_;
};

}  // namespace tandem::controller::autoscale
