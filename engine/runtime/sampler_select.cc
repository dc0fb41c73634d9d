#include "engine/runtime/sampler_select.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tandem::engine::runtime {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kPosInf = std::numeric_limits<float>::infinity();

Status NothingToSample() {
  return Status::InvalidArgument("no token can be sampled: every logit is -inf or NaN (after masking)");
}

// Inverse-CDF draw over w[0, n) in id order (zero weights are never drawn); `mass` is their sum.
// REQUIRES: some w > 0.
int32_t DrawInIdOrder(const float* w, int64_t n, double mass, double u) {
  const double target = u * mass;
  double cum = 0;
  int64_t last_positive = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (w[i] <= 0) continue;
    cum += w[i];
    last_positive = i;
    if (cum > target) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(last_positive);  // u * mass rounded up to the mass
}

// The candidates `ids` (best first, weights w, total mass `total`) truncated by top-p (a token
// stays while the mass before it is below top_p * total) and min-p (w >= min_p; the best has
// w = 1), always keeping the first. Returns how many stay.
size_t NucleusPrefix(const int32_t* ids, size_t count, const float* w, double mass_before, double limit,
                     float min_p, bool first_is_best) {
  size_t keep = 0;
  for (size_t i = 0; i < count; ++i) {
    const float wi = w[ids[i]];
    if (!(first_is_best && i == 0) && (mass_before >= limit || wi < min_p)) break;
    mass_before += wi;
    keep = i + 1;
  }
  return keep;
}

// Top-k: s->top holds the k best (SelectTop, not empty); top-p / min-p over their renormalised mass.
int32_t DrawTopK(const float* x, const SamplingParams& p, float inv_t, double u, SamplerScratch* s) {
  std::vector<int32_t>& top = s->top;
  float* w = s->w.data();
  const float m = x[top[0]];
  double total = 0;
  for (int32_t t : top) total += (w[t] = ExpNonPositive((x[t] - m) * inv_t));
  const size_t keep = NucleusPrefix(top.data(), top.size(), w, 0, p.top_p * total, p.min_p, true);
  double mass = 0;
  for (size_t i = 0; i < keep; ++i) mass += w[top[i]];
  const double target = u * mass;
  double cum = 0;
  int32_t last_positive = top[0];
  for (size_t i = 0; i < keep; ++i) {
    if (w[top[i]] <= 0) continue;
    cum += w[top[i]];
    last_positive = top[i];
    if (cum > target) return top[i];
  }
  return last_positive;
}

// Top-p over the whole vocabulary without sorting it: tokens go into buckets by depth
// d = (max - x) / temperature (monotone in x, so buckets follow the sorted order); the bucket where
// the cumulative mass crosses top_p * total is the only one sorted. Tokens deeper than 104 have
// w = 0 in float and share the last bucket.
int32_t DrawNucleus(const float* x, int64_t n, float m, float lo, const SamplingParams& p, float inv_t,
                    double u, SamplerScratch* s) {
  constexpr int32_t kBuckets = 2048;
  const float depth = std::min(104.0f, (m - lo) * inv_t);
  const float scale = depth > 0 ? static_cast<float>(kBuckets - 1) / depth : 0.0f;
  float* w = s->w.data();
  int32_t* bucket = s->idx.data();
  s->bucket_mass.assign(kBuckets, 0.0);
  for (int64_t i = 0; i < n; ++i) w[i] = ExpNonPositive((x[i] - m) * inv_t);  // vectorised; -inf -> 0
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] == kNegInf) {
      bucket[i] = kBuckets;
      continue;
    }
    const float d = (m - x[i]) * inv_t;
    const int32_t b = d >= depth ? kBuckets - 1 : std::min(kBuckets - 1, static_cast<int32_t>(d * scale));
    bucket[i] = b;
    s->bucket_mass[b] += w[i];
    total += w[i];
  }
  const double limit = p.top_p * total;
  double before = 0;
  int32_t cross = 0;
  while (cross < kBuckets - 1 && before + s->bucket_mass[cross] < limit) before += s->bucket_mass[cross++];
  std::vector<int32_t>& edge = s->top;
  edge.clear();
  for (int64_t i = 0; i < n; ++i)
    if (bucket[i] == cross) edge.push_back(static_cast<int32_t>(i));
  std::sort(edge.begin(), edge.end(),
            [x](int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });
  const size_t keep = NucleusPrefix(edge.data(), edge.size(), w, before, limit, p.min_p, cross == 0);
  for (size_t i = keep; i < edge.size(); ++i) w[edge[i]] = 0;
  double mass = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (bucket[i] > cross || w[i] < p.min_p) w[i] = 0;
    mass += w[i];
  }
  return DrawInIdOrder(w, n, mass, u);
}

}  // namespace

SamplerScratch& ThreadSamplerScratch(int64_t vocab_size) {
  thread_local SamplerScratch scratch;
  const size_t n = static_cast<size_t>(vocab_size);
  if (scratch.x.size() != n) {
    scratch.x.resize(n);
    scratch.w.resize(n);
    scratch.idx.resize(n);
  }
  return scratch;
}

void SelectTop(const float* x, int64_t n, int32_t k, std::vector<int32_t>* out) {
  out->clear();
  if (k <= 0) return;
  // Min-heap of the best k so far: its front is the worst kept. A later id with an equal value is
  // worse (ties go to the lower id), so only a strictly larger value displaces the front.
  auto better = [x](int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); };
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    if (!(v > kNegInf)) continue;  // -inf and NaN
    if (out->size() < static_cast<size_t>(k)) {
      out->push_back(static_cast<int32_t>(i));
      std::push_heap(out->begin(), out->end(), better);
    } else if (v > x[out->front()]) {
      std::pop_heap(out->begin(), out->end(), better);
      out->back() = static_cast<int32_t>(i);
      std::push_heap(out->begin(), out->end(), better);
    }
  }
  std::sort(out->begin(), out->end(), better);
}

StatusOr<int32_t> Argmax(const float* x, int64_t n) {
  // Comparisons with NaN are false, so NaN entries are skipped without a test.
  float best_value = kNegInf;
  int64_t best = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] > best_value) best_value = x[i], best = i;
  }
  if (best < 0) return NothingToSample();
  return static_cast<int32_t>(best);
}

double LogSumExp(const float* x, int64_t n, int64_t num_pos_inf, float* tmp) {
  if (num_pos_inf > 0) return std::log(static_cast<double>(num_pos_inf));
  float m = kNegInf;
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;  // NaN never wins
  if (m == kNegInf) return -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) tmp[i] = ExpNonPositive(x[i] - m);  // vectorised; NaN, -inf -> 0
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += tmp[i];
  return m + std::log(sum);
}

float RawLogprob(float v, double log_z, int64_t num_pos_inf) {
  if (num_pos_inf > 0) return v == kPosInf ? static_cast<float>(-log_z) : kNegInf;
  if (!(v > kNegInf)) return kNegInf;
  return static_cast<float>(v - log_z);
}

StatusOr<int32_t> Draw(const float* x, int64_t n, const SamplingParams& p, double u, SamplerScratch* s) {
  const float inv_t = 1.0f / p.temperature;
  if (p.top_k > 0 && p.top_k < n) {
    SelectTop(x, n, p.top_k, &s->top);
    if (s->top.empty()) return NothingToSample();
    return DrawTopK(x, p, inv_t, u, s);
  }
  float m = kNegInf, lo = kPosInf;
  for (int64_t i = 0; i < n; ++i) {
    m = x[i] > m ? x[i] : m;
    lo = x[i] > kNegInf && x[i] < lo ? x[i] : lo;
  }
  if (m == kNegInf) return NothingToSample();
  if (p.top_p < 1.0f) return DrawNucleus(x, n, m, lo, p, inv_t, u, s);
  // No sort needed: min-p is a threshold on w.
  float* w = s->w.data();
  const float min_p = p.min_p;
  for (int64_t i = 0; i < n; ++i) {  // vectorised: no reduction in this loop
    const float wi = ExpNonPositive((x[i] - m) * inv_t);
    w[i] = wi < min_p ? 0.0f : wi;
  }
  double mass = 0;
  for (int64_t i = 0; i < n; ++i) mass += w[i];
  return DrawInIdOrder(w, n, mass, u);
}

}  // namespace tandem::engine::runtime
