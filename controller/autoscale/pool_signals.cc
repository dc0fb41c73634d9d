#include "controller/autoscale/pool_signals.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tandem::controller::autoscale {
namespace {

constexpr double kQuantile = 0.95;

bool Usable(double v) { return std::isfinite(v) && v >= 0; }

std::string BucketName(std::string_view family) { return std::string(family) + "_bucket"; }

// The usable values of gauge `name` in one member's samples, summed, with how many there were.
struct GaugeReading {
  double sum = 0;
  int series = 0;
};
GaugeReading ReadGauge(const std::vector<PromSample>& samples, std::string_view name) {
  GaugeReading r;
  for (const PromSample& s : samples) {
    if (s.name != name || !Usable(s.value)) continue;
    r.sum += s.value;
    ++r.series;
  }
  return r;
}

// The increase of one series since `prev` (null: first sight, no increase).
std::optional<BucketCounts> Increase(const BucketCounts* prev, const BucketCounts& now) {
  if (prev == nullptr) return std::nullopt;
  bool reset = prev->size() != now.size();
  for (size_t i = 0; !reset && i < now.size(); ++i) {
    reset = (*prev)[i].first != now[i].first || now[i].second < (*prev)[i].second;
  }
  if (reset) return now;
  BucketCounts out = now;
  for (size_t i = 0; i < out.size(); ++i) out[i].second -= (*prev)[i].second;
  return out;
}

// Adds every series' increase since `prev` (null: the pod's first scrape) into `sum` (by le).
void AddIncreases(const HistogramSeries* prev, const HistogramSeries& now, std::map<double, double>* sum) {
  for (const auto& [labels, buckets] : now) {
    const BucketCounts* before = nullptr;
    if (prev != nullptr) {
      auto it = prev->find(labels);
      if (it != prev->end()) before = &it->second;
    }
    const std::optional<BucketCounts> inc = Increase(before, buckets);
    if (!inc) continue;
    for (const auto& [le, count] : *inc) (*sum)[le] += count;
  }
}

std::optional<double> QuantileOf(const std::map<double, double>& sum) {
  if (sum.empty()) return std::nullopt;
  const std::optional<double> q = HistogramQuantile(kQuantile, BucketCounts(sum.begin(), sum.end()));
  if (!q || !Usable(*q)) return std::nullopt;
  return q;
}

}  // namespace

bool IsPoolSignalSample(std::string_view name) {
  static const std::string kItlBucket = BucketName(kInterTokenLatencyMetric);
  static const std::string kTtftBucket = BucketName(kTimeToFirstTokenMetric);
  return name == kKvCacheUsageMetric || name == kRequestsWaitingMetric ||
         name == kPrefillTokensWaitingMetric || name == kItlBucket || name == kTtftBucket;
}

HistogramSeries CollectHistogram(const std::vector<PromSample>& samples, std::string_view family) {
  const std::string bucket_name = BucketName(family);
  std::map<SeriesLabels, std::map<double, double>> series;
  std::map<SeriesLabels, bool> bad;
  for (const PromSample& s : samples) {
    if (s.name != bucket_name) continue;
    const std::string* le_text = s.Label("le");
    if (le_text == nullptr) continue;
    const std::optional<double> le = ParsePromFloat(*le_text);
    if (!le || std::isnan(*le)) continue;
    SeriesLabels labels;
    for (const auto& label : s.labels) {
      if (label.first != "le") labels.push_back(label);
    }
    std::sort(labels.begin(), labels.end());
    std::map<double, double>& buckets = series[labels];
    if (!Usable(s.value) || !buckets.emplace(*le, s.value).second) bad[labels] = true;
  }
  HistogramSeries out;
  for (auto& [labels, buckets] : series) {
    if (bad.count(labels) == 0) out.emplace(labels, BucketCounts(buckets.begin(), buckets.end()));
  }
  return out;
}

std::optional<double> HistogramQuantile(double q, BucketCounts buckets) {
  buckets.erase(std::remove_if(buckets.begin(), buckets.end(),
                               [](const auto& b) { return std::isnan(b.first) || std::isnan(b.second); }),
                buckets.end());
  std::stable_sort(buckets.begin(), buckets.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  if (buckets.size() < 2 || buckets.back().first != std::numeric_limits<double>::infinity()) {
    return std::nullopt;
  }
  for (size_t i = 1; i < buckets.size(); ++i)
    buckets[i].second = std::max(buckets[i].second, buckets[i - 1].second);
  const double observations = buckets.back().second;
  if (!(observations > 0)) return std::nullopt;
  double rank = q * observations;
  size_t b = 0;
  while (b < buckets.size() && buckets[b].second < rank) ++b;
  if (b >= buckets.size() - 1) return buckets[buckets.size() - 2].first;
  if (b == 0 && buckets[0].first <= 0) return buckets[0].first;
  const double start = b == 0 ? 0 : buckets[b - 1].first;
  const double end = buckets[b].first;
  double count = buckets[b].second;
  if (b > 0) {
    count -= buckets[b - 1].second;
    rank -= buckets[b - 1].second;
  }
  return start + (end - start) * (rank / count);
}

reconcile::AutoscaleSignals AggregatePoolSignals(const std::vector<MemberScrape>& members,
                                                 PoolCounters* counters) {
  double kv_sum = 0;
  int kv_members = 0;
  GaugeReading waiting, prefill;
  std::map<double, double> itl, ttft;  // le -> summed increase
  PoolCounters next;
  for (const MemberScrape& m : members) {
    if (next.count(m.pod) != 0) continue;
    auto prev_it = counters->find(m.pod);
    const PodCounters* prev = prev_it == counters->end() ? nullptr : &prev_it->second;
    if (m.samples == nullptr) {
      if (prev != nullptr) next.emplace(m.pod, *prev);
      continue;
    }
    if (!m.latency_only) {
      const GaugeReading kv = ReadGauge(*m.samples, kKvCacheUsageMetric);
      if (kv.series > 0) {
        kv_sum += kv.sum / kv.series;
        ++kv_members;
      }
      const GaugeReading w = ReadGauge(*m.samples, kRequestsWaitingMetric);
      waiting.sum += w.sum;
      waiting.series += w.series;
      const GaugeReading p = ReadGauge(*m.samples, kPrefillTokensWaitingMetric);
      prefill.sum += p.sum;
      prefill.series += p.series;
    }

    PodCounters now;
    now.itl = CollectHistogram(*m.samples, kInterTokenLatencyMetric);
    now.ttft = CollectHistogram(*m.samples, kTimeToFirstTokenMetric);
    AddIncreases(prev ? &prev->itl : nullptr, now.itl, &itl);
    AddIncreases(prev ? &prev->ttft : nullptr, now.ttft, &ttft);
    next.emplace(m.pod, std::move(now));
  }
  *counters = std::move(next);

  reconcile::AutoscaleSignals out;
  if (kv_members > 0) out.kv_cache_usage = kv_sum / kv_members;
  if (waiting.series > 0) out.waiting_requests = waiting.sum;
  if (prefill.series > 0) out.waiting_prefill_tokens = prefill.sum;
  out.itl_p95_seconds = QuantileOf(itl);
  out.ttft_p95_seconds = QuantileOf(ttft);
  return out;
}

}  // namespace tandem::controller::autoscale
