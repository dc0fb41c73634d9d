#pragma once
// Where the built-in autoscaler's load signals come from (docs/autoscaling.md, "Signals"). The
// pool reconciler asks a SignalSource for a pool's latest signals and never waits on the network:
// a source scrapes in the background (PodMetricsScraper: each ready member's /metrics) and keeps
// the last result per pool.

#include <cstdint>
#include <optional>
#include <string>

#include "controller/reconcile/autoscale_plan.h"

namespace tandem::controller::autoscale {

// One pod to scrape for a pool: a member, or one of its deployment's routers.
struct PodTarget {
  std::string pool_key;  // the ModelPool's "namespace/name"
  std::string pod;       // the pod's name (the key of its counters between scrapes)
  std::string address;   // "host:port" of its metrics endpoint (status.podIP : the "metrics" port)
  // A router pod: only its latency histograms (TTFT, ITL) count for the pool, as the router is
  // the one that observes them; its gauges (a router has no KV cache or queue of its own) do not.
  bool latency_only = false;
};

// A pool's signals from one scrape round.
struct PoolSignalsSnapshot {
  reconcile::AutoscaleSignals signals;
  double scraped_at_seconds = 0;  // the source clock's reading (monotonic) when the round ended
  int pods_scraped = 0;           // members that answered with a parseable body
  int pods_failed = 0;            // members that did not (timeout, refused, bad status or body)
};

class SignalSource {
 public:
  virtual ~SignalSource() = default;
  // The pool's latest snapshot; nullopt before its first round (or when it has no target).
  virtual std::optional<PoolSignalsSnapshot> Latest(const std::string& pool_key) const = 0;
};

}  // namespace tandem::controller::autoscale
