// AggregatePoolSignals: gauge means and sums, absent signals, p95 from bucket increases across
// scrapes (first sight, restarts, layout changes, several members and series) and pruning.
#include "controller/autoscale/pool_signals.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace tandem::controller::autoscale {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
using Labels = std::vector<std::pair<std::string, std::string>>;

PromSample Sample(std::string_view name, double value, Labels labels = {}) {
  PromSample s;
  s.name = std::string(name);
  s.value = value;
  s.labels = std::move(labels);
  return s;
}

std::string LeText(double le) {
  if (le == kInf) return "+Inf";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", le);
  return buf;
}

// Appends `family`_bucket samples, one per (le, cumulative count).
void AddBuckets(std::vector<PromSample>* out, std::string_view family, const BucketCounts& buckets,
                const Labels& labels = {{"pool", "p"}}) {
  for (const auto& [le, count] : buckets) {
    Labels l = labels;
    l.emplace_back("le", LeText(le));
    out->push_back(Sample(std::string(family) + "_bucket", count, l));
  }
}

std::vector<PromSample> Itl(const BucketCounts& buckets) {
  std::vector<PromSample> s;
  AddBuckets(&s, kInterTokenLatencyMetric, buckets);
  return s;
}

TEST(PoolSignals, GaugesAreMeanAndSumOverUsableMembers) {
  const std::vector<PromSample> a = {Sample(kKvCacheUsageMetric, 0.2), Sample(kRequestsWaitingMetric, 3),
                                     Sample("unrelated", 100)};
  const std::vector<PromSample> b = {Sample(kKvCacheUsageMetric, 0.6), Sample(kRequestsWaitingMetric, 1)};
  const std::vector<PromSample> c = {Sample(kKvCacheUsageMetric, std::nan("")),
                                     Sample(kRequestsWaitingMetric, -1)};  // ignored: no say at all
  const std::vector<PromSample> d = {Sample(kKvCacheUsageMetric, kInf), Sample(kRequestsWaitingMetric, kInf)};
  PoolCounters counters;
  const reconcile::AutoscaleSignals s =
      AggregatePoolSignals({{"a", &a}, {"b", &b}, {"c", &c}, {"d", &d}, {"e", nullptr}}, &counters);
  ASSERT_TRUE(s.kv_cache_usage.has_value());
  EXPECT_DOUBLE_EQ(*s.kv_cache_usage, 0.4);
  EXPECT_EQ(s.waiting_requests, 4);
  EXPECT_FALSE(s.waiting_prefill_tokens.has_value());  // no agent exports it: absent, not 0
  EXPECT_FALSE(s.itl_p95_seconds.has_value());
  EXPECT_FALSE(s.ttft_p95_seconds.has_value());
}

TEST(PoolSignals, ALatencyOnlyMemberAddsItsHistogramsAndNoGauge) {
  PoolCounters counters;
  std::vector<PromSample> member = {Sample(kKvCacheUsageMetric, 0.2), Sample(kRequestsWaitingMetric, 1)};
  std::vector<PromSample> router = Itl({{0.01, 0}, {0.1, 0}, {1, 0}, {kInf, 0}});
  router.push_back(Sample(kKvCacheUsageMetric, 1.0));
  router.push_back(Sample(kRequestsWaitingMetric, 50));
  router.push_back(Sample(kPrefillTokensWaitingMetric, 5000));
  reconcile::AutoscaleSignals s =
      AggregatePoolSignals({{"m", &member}, {"r", &router, /*latency_only=*/true}}, &counters);
  EXPECT_DOUBLE_EQ(s.kv_cache_usage.value_or(-1), 0.2);
  EXPECT_EQ(s.waiting_requests, 1);
  EXPECT_FALSE(s.waiting_prefill_tokens.has_value());
  ASSERT_EQ(counters.count("r"), 1u);  // its counters are kept like a member's

  router = Itl({{0.01, 0}, {0.1, 0}, {1, 20}, {kInf, 20}});
  s = AggregatePoolSignals({{"m", &member}, {"r", &router, true}}, &counters);
  EXPECT_DOUBLE_EQ(s.itl_p95_seconds.value_or(-1), 0.1 + 0.9 * 0.95);
  // Only routers: the gauges are absent, never 0.
  s = AggregatePoolSignals({{"r", &router, true}}, &counters);
  EXPECT_FALSE(s.kv_cache_usage.has_value());
  EXPECT_FALSE(s.waiting_requests.has_value());
}

TEST(PoolSignals, AMemberWithSeveralSeriesCountsAsTheirMeanForUsageAndTheirSumForQueues) {
  const std::vector<PromSample> a = {Sample(kKvCacheUsageMetric, 0.2, {{"model", "x"}}),
                                     Sample(kKvCacheUsageMetric, 0.4, {{"model", "y"}}),
                                     Sample(kRequestsWaitingMetric, 2, {{"model", "x"}}),
                                     Sample(kRequestsWaitingMetric, 5, {{"model", "y"}}),
                                     Sample(kPrefillTokensWaitingMetric, 100, {{"model", "x"}}),
                                     Sample(kPrefillTokensWaitingMetric, 28, {{"model", "y"}})};
  const std::vector<PromSample> b = {Sample(kKvCacheUsageMetric, 0.9),
                                     Sample(kPrefillTokensWaitingMetric, 0)};
  PoolCounters counters;
  const reconcile::AutoscaleSignals s = AggregatePoolSignals({{"a", &a}, {"b", &b}}, &counters);
  EXPECT_DOUBLE_EQ(s.kv_cache_usage.value_or(-1), (0.3 + 0.9) / 2);
  EXPECT_EQ(s.waiting_requests, 7);
  EXPECT_EQ(s.waiting_prefill_tokens, 128);
}

TEST(PoolSignals, NoMembersOrAllFailedIsAllAbsent) {
  PoolCounters counters;
  for (const std::vector<MemberScrape>& members :
       {std::vector<MemberScrape>{}, std::vector<MemberScrape>{{"a", nullptr}, {"b", nullptr}}}) {
    const reconcile::AutoscaleSignals s = AggregatePoolSignals(members, &counters);
    EXPECT_FALSE(s.kv_cache_usage || s.waiting_requests || s.waiting_prefill_tokens || s.itl_p95_seconds ||
                 s.ttft_p95_seconds);
  }
  const std::vector<PromSample> zero = {Sample(kRequestsWaitingMetric, 0)};
  EXPECT_EQ(AggregatePoolSignals({{"a", &zero}}, &counters).waiting_requests, 0);  // measured 0 is 0
}

TEST(PoolSignals, QuantileComesFromTheIncreaseSinceThePreviousScrape) {
  PoolCounters counters;
  const auto first = Itl({{0.01, 10}, {0.1, 20}, {1, 30}, {kInf, 30}});
  EXPECT_FALSE(AggregatePoolSignals({{"a", &first}}, &counters).itl_p95_seconds);  // first sight: no window
  ASSERT_EQ(counters.count("a"), 1u);

  // 100 new observations, all in (0.1, 1]: p95 = 0.1 + 0.9 * 95/100. The old 30 do not count.
  const auto second = Itl({{0.01, 10}, {0.1, 20}, {1, 130}, {kInf, 130}});
  std::optional<double> p95 = AggregatePoolSignals({{"a", &second}}, &counters).itl_p95_seconds;
  ASSERT_TRUE(p95.has_value());
  EXPECT_DOUBLE_EQ(*p95, 0.1 + 0.9 * 0.95);

  // Nothing observed since: absent, not 0.
  EXPECT_FALSE(AggregatePoolSignals({{"a", &second}}, &counters).itl_p95_seconds);

  // 10 more, all above the last finite bound: the quantile is that bound, as in PromQL.
  const auto third = Itl({{0.01, 10}, {0.1, 20}, {1, 130}, {kInf, 140}});
  EXPECT_EQ(AggregatePoolSignals({{"a", &third}}, &counters).itl_p95_seconds, 1);
}

TEST(PoolSignals, ACounterThatWentDownIsARestartAndCountsWhole) {
  PoolCounters counters;
  const auto before = Itl({{0.01, 500}, {0.1, 900}, {1, 1000}, {kInf, 1000}});
  (void)AggregatePoolSignals({{"a", &before}}, &counters);
  // The pod restarted (same name, as a StatefulSet's): its 20 new observations, all <= 0.01.
  const auto after = Itl({{0.01, 20}, {0.1, 20}, {1, 20}, {kInf, 20}});
  std::optional<double> p95 = AggregatePoolSignals({{"a", &after}}, &counters).itl_p95_seconds;
  ASSERT_TRUE(p95.has_value());
  EXPECT_DOUBLE_EQ(*p95, 0.01 * 0.95);
  // Only one bucket went down (the others grew past their old counts since): still a restart.
  const auto partial = Itl({{0.01, 19}, {0.1, 40}, {1, 40}, {kInf, 40}});
  EXPECT_DOUBLE_EQ(AggregatePoolSignals({{"a", &partial}}, &counters).itl_p95_seconds.value_or(-1),
                   0.01 + 0.09 * ((0.95 * 40 - 19) / 21));
}

TEST(PoolSignals, ABucketLayoutChangeIsARestart) {
  PoolCounters counters;
  const auto before = Itl({{0.01, 100}, {1, 100}, {kInf, 100}});
  (void)AggregatePoolSignals({{"a", &before}}, &counters);
  const auto after = Itl({{0.5, 0}, {2, 10}, {kInf, 10}});  // counts above the old ones would not matter
  EXPECT_DOUBLE_EQ(AggregatePoolSignals({{"a", &after}}, &counters).itl_p95_seconds.value_or(-1),
                   0.5 + 1.5 * 0.95);
}

TEST(PoolSignals, IncreasesAreSummedOverMembersBeforeTheQuantile) {
  PoolCounters counters;
  const auto zero = Itl({{0.01, 0}, {0.1, 0}, {1, 0}, {kInf, 0}});
  (void)AggregatePoolSignals({{"a", &zero}, {"b", &zero}}, &counters);
  const auto a = Itl({{0.01, 90}, {0.1, 90}, {1, 90}, {kInf, 90}});  // fast: 90 at <= 10 ms
  const auto b = Itl({{0.01, 0}, {0.1, 0}, {1, 10}, {kInf, 10}});    // slow: 10 in (0.1, 1]
  std::optional<double> p95 = AggregatePoolSignals({{"a", &a}, {"b", &b}}, &counters).itl_p95_seconds;
  // Summed: 100 observations, the 95th is the 5th of the 10 in (0.1, 1].
  EXPECT_DOUBLE_EQ(p95.value_or(-1), 0.1 + 0.9 * 0.5);
}

TEST(PoolSignals, SeriesAreTrackedApartAndANewSeriesStartsWithoutAWindow) {
  PoolCounters counters;
  std::vector<PromSample> s1;
  AddBuckets(&s1, kTimeToFirstTokenMetric, {{1, 10}, {kInf, 10}}, {{"model", "x"}});
  (void)AggregatePoolSignals({{"a", &s1}}, &counters);
  std::vector<PromSample> s2;
  AddBuckets(&s2, kTimeToFirstTokenMetric, {{1, 10}, {kInf, 20}}, {{"model", "x"}});    // +10 above 1 s
  AddBuckets(&s2, kTimeToFirstTokenMetric, {{1, 500}, {kInf, 500}}, {{"model", "y"}});  // new: not counted
  const reconcile::AutoscaleSignals s = AggregatePoolSignals({{"a", &s2}}, &counters);
  EXPECT_EQ(s.ttft_p95_seconds, 1);
  EXPECT_FALSE(s.itl_p95_seconds);
  EXPECT_EQ(counters.at("a").ttft.size(), 2u);
}

TEST(PoolSignals, AFailedMemberKeepsItsCountersAndAbsentPodsArePruned) {
  PoolCounters counters;
  const auto base = Itl({{1, 0}, {kInf, 0}});
  (void)AggregatePoolSignals({{"a", &base}, {"b", &base}, {"c", &base}}, &counters);
  EXPECT_EQ(counters.size(), 3u);
  // a fails, c is gone: a's counters stay for later, c's are dropped.
  const auto more = Itl({{1, 4}, {kInf, 4}});
  EXPECT_DOUBLE_EQ(
      AggregatePoolSignals({{"a", nullptr}, {"b", &more}}, &counters).itl_p95_seconds.value_or(-1), 0.95);
  EXPECT_EQ(counters.size(), 2u);
  EXPECT_EQ(counters.count("c"), 0u);
  EXPECT_EQ(counters.at("a").itl.begin()->second, (BucketCounts{{1, 0}, {kInf, 0}}));
  // a answers again: its increase spans both windows; c is back too, as a newcomer (no window).
  const auto high = Itl({{1, 0}, {kInf, 100}});
  const reconcile::AutoscaleSignals s =
      AggregatePoolSignals({{"a", &high}, {"b", &more}, {"c", &high}}, &counters);
  EXPECT_EQ(s.itl_p95_seconds, 1);  // a's 100 above 1 s; b nothing new; c not counted
  // A pod listed twice counts once.
  const std::vector<PromSample> w = {Sample(kRequestsWaitingMetric, 3)};
  EXPECT_EQ(AggregatePoolSignals({{"a", &w}, {"a", &w}}, &counters).waiting_requests, 3);
  EXPECT_EQ(counters.size(), 1u);
}

TEST(PoolSignals, CollectHistogramSkipsBadBucketsAndDropsBadSeries) {
  std::vector<PromSample> s;
  AddBuckets(&s, kInterTokenLatencyMetric, {{0.5, 1}, {kInf, 2}}, {{"pool", "p"}, {"model", "ok"}});
  s.push_back(
      Sample("tandem_inter_token_latency_seconds_bucket", 5, {{"model", "ok"}, {"pool", "p"}}));  // no le
  s.push_back(Sample("tandem_inter_token_latency_seconds_bucket", 5,
                     {{"model", "ok"}, {"pool", "p"}, {"le", "fast"}}));  // le not a number
  AddBuckets(&s, kInterTokenLatencyMetric, {{0.5, -1}, {kInf, 2}}, {{"model", "negative"}});
  AddBuckets(&s, kInterTokenLatencyMetric, {{0.5, 1}, {0.5, 1}, {kInf, 2}}, {{"model", "repeated"}});
  AddBuckets(&s, kInterTokenLatencyMetric, {{0.5, std::nan("")}, {kInf, 2}}, {{"model", "nan"}});
  AddBuckets(&s, kTimeToFirstTokenMetric, {{0.5, 1}, {kInf, 2}}, {{"model", "other family"}});
  const HistogramSeries h = CollectHistogram(s, kInterTokenLatencyMetric);
  ASSERT_EQ(h.size(), 1u);
  // Labels are sorted, so the order they were written in does not split a series.
  EXPECT_EQ(h.begin()->first, (SeriesLabels{{"model", "ok"}, {"pool", "p"}}));
  EXPECT_EQ(h.begin()->second, (BucketCounts{{0.5, 1}, {kInf, 2}}));
}

TEST(HistogramQuantile, FollowsPromQL) {
  EXPECT_FALSE(HistogramQuantile(0.95, {}));
  EXPECT_FALSE(HistogramQuantile(0.95, {{kInf, 10}}));            // fewer than two buckets
  EXPECT_FALSE(HistogramQuantile(0.95, {{1, 10}, {2, 10}}));      // no +Inf bucket
  EXPECT_FALSE(HistogramQuantile(0.95, {{1, 0}, {kInf, 0}}));     // no observation
  EXPECT_EQ(HistogramQuantile(0.5, {{kInf, 10}, {1, 10}}), 0.5);  // any order; first bucket from 0
  EXPECT_EQ(HistogramQuantile(0.5, {{1, 2}, {2, 10}, {kInf, 10}}), 1 + 1.0 * (5 - 2) / 8);
  EXPECT_EQ(HistogramQuantile(0.99, {{1, 2}, {2, 3}, {kInf, 10}}), 2);    // in +Inf: the last finite bound
  EXPECT_EQ(HistogramQuantile(0.5, {{-1, 6}, {1, 10}, {kInf, 10}}), -1);  // first bound <= 0: that bound
  // Non-monotonic counts (members with different layouts) are raised first.
  EXPECT_EQ(HistogramQuantile(0.5, {{1, 8}, {2, 4}, {3, 10}, {kInf, 10}}), 0.625);
  EXPECT_EQ(HistogramQuantile(1, {{1, 2}, {2, 10}, {kInf, 10}}), 2);
  EXPECT_EQ(HistogramQuantile(0.5, {{1, 2}, {std::nan(""), 3}, {2, 10}, {kInf, 10}}), 1 + 3.0 / 8);
}

TEST(PoolSignals, NegativeQuantileIsAbsent) {
  PoolCounters counters;
  const auto a = Itl({{-2, 0}, {kInf, 0}});
  (void)AggregatePoolSignals({{"a", &a}}, &counters);
  const auto b = Itl({{-2, 10}, {kInf, 10}});
  EXPECT_FALSE(AggregatePoolSignals({{"a", &b}}, &counters).itl_p95_seconds);
}

TEST(PoolSignals, NameFilter) {
  EXPECT_TRUE(IsPoolSignalSample("tandem_kv_cache_usage_ratio"));
  EXPECT_TRUE(IsPoolSignalSample("tandem_requests_waiting"));
  EXPECT_TRUE(IsPoolSignalSample("tandem_prefill_tokens_waiting"));
  EXPECT_TRUE(IsPoolSignalSample("tandem_inter_token_latency_seconds_bucket"));
  EXPECT_TRUE(IsPoolSignalSample("tandem_time_to_first_token_seconds_bucket"));
  EXPECT_FALSE(IsPoolSignalSample("tandem_inter_token_latency_seconds_count"));
  EXPECT_FALSE(IsPoolSignalSample("tandem_requests_running"));
}

}  // namespace
}  // namespace tandem::controller::autoscale
