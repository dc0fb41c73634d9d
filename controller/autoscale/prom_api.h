#pragma once
// The pure half of the Prometheus signal source (prom_query.h): the PromQL of each autoscaling
// signal, the label selector template that finds a pool's series, and the instant-query answer
// read as untrusted input. No I/O.
//
// The queries mirror what pool_signals.h computes from pod scrapes, with `SEL` the expanded
// selector and `W` the rate window (docs/autoscaling.md, "Prometheus as the signal source"):
//
//   kv_cache_usage          avg((tandem_kv_cache_usage_ratio{SEL} >= 0) < +Inf)
//   waiting_requests        sum((tandem_requests_waiting{SEL} >= 0) < +Inf)
//   waiting_prefill_tokens  sum((tandem_prefill_tokens_waiting{SEL} >= 0) < +Inf)
//   itl_p95_seconds         histogram_quantile(0.95, sum by (le) (rate(
//                               tandem_inter_token_latency_seconds_bucket{SEL}[W])))
//   ttft_p95_seconds        the same over tandem_time_to_first_token_seconds_bucket
//
// The comparisons drop negative and non-finite series before they are aggregated, as the scraper
// ignores them; an aggregation over no series is an empty vector, a quantile over no observation
// NaN, and both read as an absent signal, never 0.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tandem::controller::autoscale {

// The placeholders of a selector template and what replaces them (escaped as PromQL strings).
struct PoolLabelValues {
  std::string ns;          // {namespace}: the ModelPool's namespace
  std::string deployment;  // {deployment}: the ModelDeployment's name (the agents' `deployment` label)
  std::string pool;        // {pool}: the pool's role, "prefill" or "decode" (the agents' `pool` label)
};

// The gauges' selector: the agents label every series with deployment, pool and role, and a
// Kubernetes service discovery's usual relabeling adds `namespace`.
inline constexpr std::string_view kDefaultPromSelector =
    R"(namespace="{namespace}",deployment="{deployment}",pool="{pool}")";
// The latency histograms' selector: only the router observes TTFT and ITL (docs/observability.md),
// so a pool's latency is its deployment's, read at the router.
inline constexpr std::string_view kDefaultPromLatencySelector =
    R"(namespace="{namespace}",deployment="{deployment}",pool="router")";

inline constexpr size_t kMaxSelectorTemplateBytes = 1024;

// OK when `selector_template` is non-empty, at most kMaxSelectorTemplateBytes, and its every '{'
// opens one of {namespace}, {deployment}, {pool}, with no other '{' or '}' (the text goes between
// a metric name's braces). Not checked: that the rest is valid PromQL (Prometheus answers 400).
Status CheckSelectorTemplate(std::string_view selector_template);

// `value` as the inside of a PromQL double-quoted string: \ " and control characters escaped.
std::string EscapePromQLString(std::string_view value);

// The template with each placeholder replaced by its escaped value.
// REQUIRES: CheckSelectorTemplate(selector_template).ok().
std::string ExpandSelector(std::string_view selector_template, const PoolLabelValues& values);

// A Prometheus duration as range selectors take it: one or more <integer><unit>, units ms, s, m,
// h, d, w, y, each at most once and from largest to smallest ("2m", "1h30m", "500ms"). Returns its
// milliseconds; InvalidArgument when malformed, zero or over ten years.
StatusOr<int64_t> ParsePromDurationMs(std::string_view text);

enum class PoolSignal { kKvCacheUsage, kWaitingRequests, kItlP95, kTtftP95, kWaitingPrefillTokens };

// "kv_cache_usage", ... (the AutoscaleSignals field without its unit), for logs.
std::string_view PoolSignalName(PoolSignal signal);

// The signals the planner reads for a pool of `role` ("decode": KV usage, waiting requests, ITL;
// "prefill": TTFT, waiting prefill tokens); empty for any other role.
std::vector<PoolSignal> SignalsForRole(std::string_view role);

// True for the signals whose query uses the latency selector (the histograms).
bool IsLatencySignal(PoolSignal signal);

// The instant query of `signal`. REQUIRES: `selector` expanded by ExpandSelector, `rate_window`
// accepted by ParsePromDurationMs.
std::string SignalQuery(PoolSignal signal, std::string_view selector, std::string_view rate_window);

// `value` percent-encoded for a URL's query string (everything but A-Z a-z 0-9 - . _ ~).
std::string UrlQueryEscape(std::string_view value);

// A Prometheus server's base URL, split for kube::HttpClient (which takes no path).
struct PromServerUrl {
  std::string server;       // "http://host:port" or "https://host[:port]"
  std::string path_prefix;  // "" or "/prefix" (a server behind --web.route-prefix or a proxy)
};

// "http[s]://host[:port][/prefix]" with a DNS name, IPv4 or [IPv6] host; no credentials, query or
// fragment; a trailing '/' is dropped. InvalidArgument otherwise.
StatusOr<PromServerUrl> ParsePromServerUrl(std::string_view url);

// The value of an instant query's answer (GET /api/v1/query) whose result is at most one sample,
// as the aggregations above give:
//   - a value: 200, {"status":"success","data":{"resultType":"vector","result":[{"value":[t,"v"]}]}}
//     with v finite and >= 0;
//   - nullopt (the signal is absent, the query worked): an empty vector, or v NaN, ±Inf or < 0;
//   - an error (the query failed): a body over max_body_bytes (ResourceExhausted), a status other
//     than 2xx or "success" (Unavailable, with Prometheus' errorType and error when it gave them),
//     anything malformed or not a vector, more than one sample (InvalidArgument).
// Never throws, whatever the body.
StatusOr<std::optional<double>> ParseInstantAnswer(int http_status, std::string_view body,
                                                   size_t max_body_bytes);

}  // namespace tandem::controller::autoscale
