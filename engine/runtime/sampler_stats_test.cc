// Sampler distributions against the exact expected ones (computed here in double with a full
// sort), and logprobs against an independent log_softmax.

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "engine/runtime/sampler.h"

namespace tandem::engine::runtime {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// The distribution the sampler must draw from: temperature, then top-k, top-p over the top-k
// renormalised distribution, min-p relative to the most likely token.
std::vector<double> Expected(const std::vector<float>& logits, const SamplingParams& p) {
  const size_t n = logits.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return logits[a] > logits[b]; });
  const double max_z = logits[order[0]] / static_cast<double>(p.temperature);
  std::vector<double> e(n);
  for (size_t i = 0; i < n; ++i) e[i] = std::exp(logits[i] / static_cast<double>(p.temperature) - max_z);
  const size_t k = p.top_k > 0 ? std::min<size_t>(p.top_k, n) : n;
  double top_k_mass = 0;
  for (size_t r = 0; r < k; ++r) top_k_mass += e[order[r]];
  std::vector<double> probs(n, 0.0);
  double before = 0, kept = 0;
  for (size_t r = 0; r < k; ++r) {
    const size_t t = order[r];
    if (r > 0 && (before >= p.top_p * top_k_mass || e[t] < p.min_p)) break;
    before += e[t];
    probs[t] = e[t];
    kept += e[t];
  }
  for (double& q : probs) q /= kept;
  return probs;
}

// Pearson's chi-square over the bins the distribution keeps (tokens it excludes must never be
// drawn; bins expected below 5 draws are pooled into the smallest regular bin), against the
// Wilson-Hilferty approximation of the chi-square quantile at z = 5: a false failure rate near
// 3e-7 for the fixed seeds here, while a wrong distribution fails by far.
void ExpectDrawnFrom(const std::vector<int64_t>& counts, const std::vector<double>& probs, int64_t draws) {
  std::vector<std::pair<double, double>> bins;  // (expected, observed)
  double pooled_e = 0, pooled_o = 0;
  for (size_t t = 0; t < probs.size(); ++t) {
    if (probs[t] == 0) {
      EXPECT_EQ(counts[t], 0) << "token " << t << " is outside the truncated distribution";
      continue;
    }
    const double expected = probs[t] * static_cast<double>(draws);
    if (expected < 5) {
      pooled_e += expected, pooled_o += static_cast<double>(counts[t]);
    } else {
      bins.push_back({expected, static_cast<double>(counts[t])});
    }
  }
  ASSERT_FALSE(bins.empty()) << "test design: too few draws";
  auto smallest = std::min_element(bins.begin(), bins.end());
  smallest->first += pooled_e;
  smallest->second += pooled_o;
  double chi2 = 0;
  for (auto& [e, o] : bins) chi2 += (o - e) * (o - e) / e;
  const int df = static_cast<int>(bins.size()) - 1;
  if (df == 0) return;
  const double z = 5.0, a = 2.0 / (9.0 * df);
  const double bound = df * std::pow(1 - a + z * std::sqrt(a), 3);
  EXPECT_LT(chi2, bound) << "df " << df;
}

std::vector<int64_t> Draw(const SamplingParams& p, const std::vector<float>& logits, int64_t draws) {
  StatusOr<Sampler> s = Sampler::Create(p, static_cast<int64_t>(logits.size()), 2024);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  std::vector<int64_t> counts(logits.size(), 0);
  std::vector<int32_t> out;
  out.reserve(draws);
  for (int64_t i = 0; i < draws; ++i) {
    StatusOr<SampleResult> r = s->Sample(logits, {}, out);
    EXPECT_TRUE(r.ok());
    ++counts[r->token];
    out.push_back(r->token);
  }
  return counts;
}

const std::vector<float> kLogits = {2.0f, 1.5f, 1.2f,  1.0f,  0.7f,  0.5f,
                                    0.3f, 0.0f, -0.5f, -1.0f, -2.0f, -3.0f};

TEST(SamplerStatsTest, Temperature) {
  for (float t : {1.0f, 0.5f, 2.0f}) {
    SamplingParams p;
    p.temperature = t;
    ExpectDrawnFrom(Draw(p, kLogits, 60000), Expected(kLogits, p), 60000);
  }
}

TEST(SamplerStatsTest, TopKTopPMinP) {
  std::vector<SamplingParams> cases(5);
  cases[0].top_k = 4;
  cases[1].top_p = 0.6f;
  cases[2].min_p = 0.2f;
  cases[3].temperature = 0.7f, cases[3].top_k = 8, cases[3].top_p = 0.8f, cases[3].min_p = 0.1f;
  cases[4].temperature = 1.5f, cases[4].top_k = 6, cases[4].top_p = 0.5f;  // top-p within top-k's mass
  for (const SamplingParams& p : cases) {
    SCOPED_TRACE(testing::Message() << "top_k " << p.top_k << " top_p " << p.top_p << " min_p " << p.min_p);
    const std::vector<double> probs = Expected(kLogits, p);
    ASSERT_GT(std::count(probs.begin(), probs.end(), 0.0), 0);  // each case truncates something
    ExpectDrawnFrom(Draw(p, kLogits, 60000), probs, 60000);
  }
}

TEST(SamplerStatsTest, NucleusOfHundredsOfTokens) {
  // Many tokens spread over many depth buckets; the nucleus ends inside one of them.
  std::vector<float> logits(1000);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0, 0.3f);
  for (float& v : logits) v = normal(rng);
  SamplingParams p;
  p.top_p = 0.3f;
  p.temperature = 0.9f;
  const std::vector<double> probs = Expected(logits, p);
  ASSERT_GT(std::count_if(probs.begin(), probs.end(), [](double q) { return q > 0; }), 150);
  ExpectDrawnFrom(Draw(p, logits, 40000), probs, 40000);
}

TEST(SamplerStatsTest, PenalisedDistributionMatchesHandComputedLogits) {
  // Prompt {0}, output {1, 3, 3}; repetition 2, frequency 0.5, presence 0.25:
  //   token 0 (prompt):        2.0 / 2                  =  1.0
  //   token 1 (output, once): -1.0 * 2 - 0.5 - 0.25     = -2.75
  //   token 2 (unseen):        0.5
  //   token 3 (output, twice): 1.0 / 2 - 2 * 0.5 - 0.25 = -0.75
  const std::vector<float> logits = {2.0f, -1.0f, 0.5f, 1.0f};
  const std::vector<float> penalised = {1.0f, -2.75f, 0.5f, -0.75f};
  SamplingParams p;
  p.repetition_penalty = 2;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  const std::vector<int32_t> prompt = {0}, output = {1, 3, 3};
  const int64_t draws = 40000;
  std::vector<int64_t> counts(4, 0);
  for (int64_t i = 0; i < draws; ++i) {  // a fresh seed per draw: the position stays fixed
    StatusOr<Sampler> s = Sampler::Create(p, 4, static_cast<uint64_t>(i));
    ASSERT_TRUE(s.ok());
    ++counts[s->Sample(logits, prompt, output)->token];
  }
  SamplingParams plain;
  ExpectDrawnFrom(counts, Expected(penalised, plain), draws);
}

TEST(SamplerStatsTest, LogprobsAreTheRawLogSoftmax) {
  std::vector<float> logits(5000);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0, 4);
  for (float& v : logits) v = normal(rng);
  double m = *std::max_element(logits.begin(), logits.end()), sum = 0;
  for (float v : logits) sum += std::exp(v - m);
  const double log_z = m + std::log(sum);
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  SamplingParams p;
  p.logprobs = 5;
  p.temperature = 0.3f;  // neither temperature nor penalties change the reported logprobs
  p.repetition_penalty = 1.5f;
  StatusOr<Sampler> s = Sampler::Create(p, 5000, 1);
  ASSERT_TRUE(s.ok());
  std::vector<int32_t> out;
  for (int i = 0; i < 20; ++i) {
    StatusOr<SampleResult> r = s->Sample(logits, std::vector<int32_t>{order[0]}, out);
    ASSERT_TRUE(r.ok());
    EXPECT_NEAR(r->logprob, logits[r->token] - log_z, 1e-5);
    ASSERT_EQ(r->top_logprobs.size(), 5u);
    for (int j = 0; j < 5; ++j) {
      EXPECT_EQ(r->top_logprobs[j].token, order[j]);
      EXPECT_NEAR(r->top_logprobs[j].logprob, logits[order[j]] - log_z, 1e-5);
    }
    out.push_back(r->token);
  }
  p.logprobs = -1;
  StatusOr<Sampler> none = Sampler::Create(p, 5000, 1);
  EXPECT_TRUE(none->Sample(logits, {}, {})->top_logprobs.empty());
}

TEST(SamplerStatsTest, PositiveInfinityIsUniformOverThoseTokensAndNanIsNeverDrawn) {
  const std::vector<float> logits = {1.0f, kInf, std::nanf(""), kInf, 30.0f};
  SamplingParams p;
  p.logprobs = 1;
  StatusOr<Sampler> s = Sampler::Create(p, 5, 9);
  std::vector<int64_t> counts(5, 0);
  std::vector<int32_t> out;
  for (int i = 0; i < 2000; ++i) {
    StatusOr<SampleResult> r = s->Sample(logits, {}, out);
    ASSERT_TRUE(r.ok());
    EXPECT_FLOAT_EQ(r->logprob, -std::log(2.0f));
    ++counts[r->token];
    out.push_back(r->token);
  }
  ExpectDrawnFrom(counts, {0, 0.5, 0, 0.5, 0}, 2000);
  // NaN only: the finite tokens are drawn as if the NaN were -inf.
  const std::vector<float> with_nan = {0.0f, std::nanf(""), 0.0f};
  SamplingParams q;
  StatusOr<Sampler> t = Sampler::Create(q, 3, 9);
  std::vector<int64_t> c3(3, 0);
  out.clear();
  for (int i = 0; i < 2000; ++i) {
    const int32_t tok = t->Sample(with_nan, {}, out)->token;
    ++c3[tok];
    out.push_back(tok);
  }
  ExpectDrawnFrom(c3, {0.5, 0, 0.5}, 2000);
}

TEST(SamplerStatsTest, TopKOnAKimiSizedVocabularyKeepsTheKLargest) {
  std::vector<float> logits(163840);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0, 2);
  for (float& v : logits) v = normal(rng);
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + 50, order.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  std::vector<int32_t> top(order.begin(), order.begin() + 50);
  std::sort(top.begin(), top.end());
  SamplingParams p;
  p.top_k = 50;
  p.temperature = 3;  // flat enough that many of the 50 are drawn
  StatusOr<Sampler> s = Sampler::Create(p, 163840, 4);
  std::vector<int32_t> out;
  for (int i = 0; i < 200; ++i) {
    const int32_t tok = s->Sample(logits, {}, out)->token;
    EXPECT_TRUE(std::binary_search(top.begin(), top.end(), tok)) << tok;
    out.push_back(tok);
  }
  std::sort(out.begin(), out.end());
  EXPECT_GT(std::unique(out.begin(), out.end()) - out.begin(), 20);
}

}  // namespace
}  // namespace tandem::engine::runtime
