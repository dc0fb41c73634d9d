#pragma once
// PrometheusSignalSource: the built-in autoscaler's signals from a Prometheus server's query API
// instead of the pods (the alternative to PodMetricsScraper, for clusters that run Prometheus
// already). A background thread, every interval, asks for the builtin-autoscaled pools, runs one
// instant query per signal the pool's role is planned on (`GET <url>/api/v1/query?query=...`, the
// PromQL of prom_api.h; concurrently, at most max_concurrent_queries at a time, each bounded by
// timeout_ms including the connect) and stores one snapshot per pool. Latest() only reads the
// stored snapshots under a mutex: it never waits on the network.
//
// A query that fails (refused, timeout, an error answer, a malformed or oversized body) counts in
// queries_failed and its signal is absent, not 0; so is one that answers no value (no series, no
// observation in the rate window, NaN). Every listed pool gets a snapshot each round, even with
// every signal absent; a pool no longer listed loses it.
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
#include "common/status.h"
#include "controller/autoscale/prom_api.h"
#include "controller/autoscale/signals.h"
#include "controller/kube/cancel.h"
#include "controller/kube/http_client.h"

namespace tandem::controller::autoscale {

// One builtin-autoscaled pool to query.
struct PoolQueryTarget {
  std::string pool_key;    // the ModelPool's "namespace/name" (the key of its snapshot)
  PoolLabelValues labels;  // what the selector templates' placeholders become; labels.pool is the role
};

struct PrometheusSignalSourceOptions {
  // "http://prometheus.monitoring:9090", optionally with a path prefix; https verifies the server
  // against the system's CAs.
  std::string url;
  std::string selector = std::string(kDefaultPromSelector);                 // the gauges' series
  std::string latency_selector = std::string(kDefaultPromLatencySelector);  // the histograms' series
  std::string rate_window = "2m";  // the p95s' rate() range; at least 4 of Prometheus' scrape intervals
  int64_t interval_ms = 15'000;    // from one round's start to the next's (back to back when longer)
  int64_t timeout_ms = 1'000;      // one query: connect, send, evaluation (sent as ?timeout=), answer
  int max_concurrent_queries = 4;
  size_t max_answer_bytes = 1u << 20;  // a one-sample answer is ~100 bytes
  // The pools to query this round (the informer cache's builtin-autoscaled ModelPools). Called on
  // the source's thread at the start of each round; must not block. Empty: nothing to query.
  std::function<std::vector<PoolQueryTarget>()> pools;
  // Called after each round, on the round's thread, with the pools that got a snapshot (sorted).
  // May be empty. Must not call RunOnce() or Stop().
  std::function<void(const std::vector<std::string>& pool_keys)> on_round;
  // For scraped_at_seconds; null: SteadyClock::Default(). Not owned; must outlive the source.
  const Clock* clock = nullptr;
};

// Totals since construction (what a metrics hook would export).
struct PrometheusQueryStats {
  uint64_t rounds = 0;          // rounds that published snapshots
  uint64_t queries_ok = 0;      // answered with a value or with none (an absent signal)
  uint64_t queries_failed = 0;  // transport errors, error answers, malformed answers
};

class PrometheusSignalSource final : public SignalSource {
 public:
  // InvalidArgument when the url, a selector template or the rate window is malformed
  // (ParsePromServerUrl, CheckSelectorTemplate, ParsePromDurationMs).
  static StatusOr<std::unique_ptr<PrometheusSignalSource>> New(PrometheusSignalSourceOptions options);
  // Stops the background thread.
  ~PrometheusSignalSource() override;
  PrometheusSignalSource(const PrometheusSignalSource&) = delete;
  PrometheusSignalSource& operator=(const PrometheusSignalSource&) = delete;

  // Starts the background rounds (the first at once). No-op when already started.
  void Start();
  // Cancels the queries in flight, waits for the background thread and returns; a round cut short
  // publishes nothing. Returns promptly even while a query is waiting on a slow server. Start() may
  // be called again afterwards. No-op when not started.
  void Stop();
  // One round on the calling thread (tests; also usable without Start()). A Stop() during it
  // cancels it.
  void RunOnce();

  std::optional<PoolSignalsSnapshot> Latest(const std::string& pool_key) const override;
  PrometheusQueryStats stats() const;

 private:
  struct Query {
    size_t pool;  // index into the round's pools
    PoolSignal signal;
    std::string promql;
  };
  struct Outcome {
    Status status;
    std::optional<double> value;
  };

  PrometheusSignalSource(PrometheusSignalSourceOptions options, PromServerUrl url,
                         std::unique_ptr<kube::HttpClient> client);
  void Loop(std::shared_ptr<kube::CancelToken> cancel);
  void RunRound(kube::CancelToken& cancel);
  std::vector<Query> PlanQueries(const std::vector<PoolQueryTarget>& pools) const;
  std::vector<Outcome> RunAll(const std::vector<Query>& queries, kube::CancelToken& cancel);
  Outcome RunOne(const Query& query, kube::CancelToken& cancel);
  void LogTransitions(const std::vector<PoolQueryTarget>& pools, const std::vector<Query>& queries,
                      const std::vector<Outcome>& outcomes);

  const PrometheusSignalSourceOptions options_;
  const PromServerUrl url_;
  const Clock& clock_;
  const std::unique_ptr<kube::HttpClient> client_;  // thread-safe; one connection per worker

  std::mutex round_mu_;                                   // held for a whole round; guards failing_
  std::set<std::pair<std::string, PoolSignal>> failing_;  // (pool key, signal) failing now

  mutable std::mutex mu_;  // guards the members below
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread thread_;
  std::shared_ptr<kube::CancelToken> cancel_;  // the current rounds'; replaced after Stop()
  std::map<std::string, PoolSignalsSnapshot> snapshots_;
  PrometheusQueryStats stats_;
};

}  // namespace tandem::controller::autoscale
