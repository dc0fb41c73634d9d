#pragma once
// One pool's AutoscaleSignals from the scraped samples of its members. Pure: the caller keeps the
// per-pod counter state (PoolCounters) between scrapes and passes it back in.
//
//   kv_cache_usage          mean over members of tandem_kv_cache_usage_ratio; a member with
//                           several series (e.g. a model label) counts as the mean of its series
//   waiting_requests        sum over members and series of tandem_requests_waiting
//   waiting_prefill_tokens  sum over members and series of tandem_prefill_tokens_waiting
//   itl_p95_seconds         0.95 quantile of tandem_inter_token_latency_seconds
//   ttft_p95_seconds        0.95 quantile of tandem_time_to_first_token_seconds
//
// A gauge series whose value is negative or not finite is ignored; a signal no member reports is
// absent (never 0). A latency-only member (the deployment's router, which observes TTFT and ITL
// for both pools) adds its histograms and nothing else. The quantiles are PromQL's
// histogram_quantile(0.95, sum by (le) (increase(X_bucket[since the last scrape]))): each series'
// cumulative `_bucket{le}` counts less the same pod's counts at its previous successful scrape,
// summed over every series of every member by `le`, then interpolated linearly inside the bucket
// the rank falls in. A series seen for the first time only records its counts (no increase yet);
// a series whose bucket layout changed or any of whose buckets went down (the pod restarted)
// counts its new values whole as the increase. No observation in the window: absent.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "controller/autoscale/prom_text.h"
#include "controller/reconcile/autoscale_plan.h"

namespace tandem::controller::autoscale {

inline constexpr std::string_view kKvCacheUsageMetric = "tandem_kv_cache_usage_ratio";
inline constexpr std::string_view kRequestsWaitingMetric = "tandem_requests_waiting";
inline constexpr std::string_view kPrefillTokensWaitingMetric = "tandem_prefill_tokens_waiting";
inline constexpr std::string_view kInterTokenLatencyMetric = "tandem_inter_token_latency_seconds";
inline constexpr std::string_view kTimeToFirstTokenMetric = "tandem_time_to_first_token_seconds";

// Cumulative bucket counts of one histogram series: (upper bound `le`, count), le ascending; the
// last bound is +Inf in a well-formed series.
using BucketCounts = std::vector<std::pair<double, double>>;

// A series' labels other than `le`, sorted by name: the identity of a series within one pod.
using SeriesLabels = std::vector<std::pair<std::string, std::string>>;

// One histogram's series in one pod's last successful scrape.
using HistogramSeries = std::map<SeriesLabels, BucketCounts>;

// What one pod's previous successful scrape left for the next one's increases.
struct PodCounters {
  HistogramSeries itl;   // tandem_inter_token_latency_seconds_bucket
  HistogramSeries ttft;  // tandem_time_to_first_token_seconds_bucket
};

// A pool's counter state, by pod name.
using PoolCounters = std::map<std::string, PodCounters>;

// One member's part in a round.
struct MemberScrape {
  std::string pod;
  // Not owned; must outlive the call. Null: the scrape failed (the member contributes nothing and
  // its counters are kept for its next successful scrape).
  const std::vector<PromSample>* samples = nullptr;
  // Only the histograms count (a router of the pool's deployment): its gauges are ignored.
  bool latency_only = false;
};

// The pool's signals from this round's members. Updates `counters`: each scraped member's entry
// becomes its current counts, a failed member's stays, and pods not among `members` are removed.
// A pod listed twice counts once (the first entry).
reconcile::AutoscaleSignals AggregatePoolSignals(const std::vector<MemberScrape>& members,
                                                 PoolCounters* counters);

// PromQL's histogram_quantile over cumulative buckets (any order; equal bounds are not merged).
// nullopt when there is no +Inf bucket, fewer than two buckets, or no observation; a bucket with a
// NaN bound or count is ignored; counts that decrease with le are first raised to be monotonic, as
// Prometheus does. REQUIRES: 0 <= q <= 1.
std::optional<double> HistogramQuantile(double q, BucketCounts buckets);

// The histogram `family`'s series in one pod's samples (from its `family`_bucket samples). A
// bucket without a parseable `le` is skipped; a series with a negative, non-finite or repeated
// bucket is dropped whole.
HistogramSeries CollectHistogram(const std::vector<PromSample>& samples, std::string_view family);

// True for the sample names AggregatePoolSignals reads (a PromNameFilter for the scraper).
bool IsPoolSignalSample(std::string_view name);

}  // namespace tandem::controller::autoscale
