#include "engine/runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/runtime/sampler_select.h"

namespace tandem::engine::runtime {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

Sampler Make(const SamplingParams& p, int64_t vocab, uint64_t seed = 1, std::vector<int32_t> eos = {}) {
  StatusOr<Sampler> s = Sampler::Create(p, vocab, seed, eos);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return *std::move(s);
}

int32_t SampleOne(Sampler& s, const std::vector<float>& logits, const std::vector<int32_t>& prompt = {},
                  const std::vector<int32_t>& output = {}) {
  StatusOr<SampleResult> r = s.Sample(logits, prompt, output);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r->token : -1;
}

TEST(SamplerTest, ExpApproximationIsAccurateAndExactAtZero) {
  EXPECT_EQ(ExpNonPositive(0.0f), 1.0f);  // the most likely token weighs exactly 1 (min-p = 1 keeps it)
  EXPECT_EQ(ExpNonPositive(-kInf), 0.0f);
  EXPECT_EQ(ExpNonPositive(-87.5f), 0.0f);
  double worst = 0;
  for (float x = -87.0f; x <= 0.0f; x += 0.000731f) {
    const double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(ExpNonPositive(x) - want) / want);
  }
  EXPECT_LT(worst, 5e-7);
}

TEST(SamplerTest, ValidationNamesTheField) {
  struct Case {
    std::function<void(SamplingParams&)> edit;
    const char* field;
  };
  const float nan = std::nanf("");
  const std::vector<Case> cases = {
      {[](SamplingParams& p) { p.temperature = -0.1f; }, "temperature"},
      {[&](SamplingParams& p) { p.temperature = nan; }, "temperature"},
      {[](SamplingParams& p) { p.top_k = -1; }, "top_k"},
      {[](SamplingParams& p) { p.top_p = 0.0f; }, "top_p"},
      {[](SamplingParams& p) { p.top_p = 1.01f; }, "top_p"},
      {[&](SamplingParams& p) { p.top_p = nan; }, "top_p"},
      {[](SamplingParams& p) { p.min_p = -0.01f; }, "min_p"},
      {[](SamplingParams& p) { p.min_p = 1.5f; }, "min_p"},
      {[](SamplingParams& p) { p.repetition_penalty = 0.0f; }, "repetition_penalty"},
      {[](SamplingParams& p) { p.frequency_penalty = 2.5f; }, "frequency_penalty"},
      {[](SamplingParams& p) { p.presence_penalty = -2.01f; }, "presence_penalty"},
      {[](SamplingParams& p) { p.max_tokens = 0; }, "max_tokens"},
      {[](SamplingParams& p) { p.min_tokens = -1; }, "min_tokens"},
      {[](SamplingParams& p) { p.min_tokens = 17; }, "min_tokens"},
      {[](SamplingParams& p) { p.logprobs = -2; }, "logprobs"},
      {[](SamplingParams& p) { p.logprobs = 21; }, "logprobs"},
      {[](SamplingParams& p) {
         p.stop_token_ids = {3, 100};
       },
       "stop_token_ids[1]"},
      {[](SamplingParams& p) { p.stop_token_ids = {-1}; }, "stop_token_ids[0]"},
      {[](SamplingParams& p) {
         p.stop = {"ok", ""};
       },
       "stop[1]"},
      {[](SamplingParams& p) { p.stop = {"\xC3"}; }, "stop[0]"},
      {[](SamplingParams& p) { p.stop.assign(17, "x"); }, "stop"},
  };
  for (const Case& c : cases) {
    SamplingParams p;
    c.edit(p);
    const Status s = ValidateSamplingParams(p, 100);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.field;
    EXPECT_NE(s.message().find(c.field), std::string::npos) << s.message();
    EXPECT_FALSE(Sampler::Create(p, 100, 0).ok()) << c.field;
  }
  SamplingParams edge;
  edge.temperature = 0;
  edge.top_p = 1;
  edge.min_p = 1;
  edge.frequency_penalty = -2;
  edge.presence_penalty = 2;
  edge.min_tokens = edge.max_tokens;
  edge.logprobs = 20;
  edge.stop_token_ids = {0, 99};
  edge.stop.assign(16, "é");
  EXPECT_TRUE(ValidateSamplingParams(edge, 100).ok());
}

TEST(SamplerTest, RejectsWrongRowSizeAndEmptyDistributions) {
  SamplingParams p;
  Sampler s = Make(p, 4);
  EXPECT_EQ(s.Sample(std::vector<float>(3, 0.0f), {}, {}).status().code(), StatusCode::kInvalidArgument);
  const float nan = std::nanf("");
  for (float t : {0.0f, 1.0f}) {
    p.temperature = t;
    Sampler z = Make(p, 4);
    EXPECT_EQ(z.Sample(std::vector<float>{nan, -kInf, nan, -kInf}, {}, {}).status().code(),
              StatusCode::kInvalidArgument);
  }
}

TEST(SamplerTest, GreedyIsArgmaxWithTiesToTheLowestId) {
  SamplingParams p;
  p.temperature = 0;
  Sampler s = Make(p, 5);
  EXPECT_EQ(SampleOne(s, {1, 3, 3, 2, -1}), 1);
  EXPECT_EQ(SampleOne(s, {-5, -5, -5, -5, -5}), 0);
  EXPECT_EQ(SampleOne(s, {0, 0, 0, 0, 7}), 4);
  // NaN is never chosen; +inf beats everything, the lowest +inf first.
  EXPECT_EQ(SampleOne(s, {std::nanf(""), 1, 2, 0, 0}), 2);
  EXPECT_EQ(SampleOne(s, {1, kInf, 2, kInf, 0}), 1);
  // Long rows (the vectorised path): ties in different lanes and in the tail, NaN anywhere.
  for (int n : {16, 37, 1001}) {
    std::vector<float> row(n, -1.0f);
    row[n - 1] = 4;
    EXPECT_EQ(Make(p, n).Sample(row, {}, {})->token, n - 1);
    row[n / 2 + 3] = 4;
    row[n / 2] = std::nanf("");
    EXPECT_EQ(Make(p, n).Sample(row, {}, {})->token, n / 2 + 3);
    row[5] = 4;
    EXPECT_EQ(Make(p, n).Sample(row, {}, {})->token, 5);
  }
}

TEST(SamplerTest, TinyTemperaturesAreGreedyAndExtremePenaltiesStayFinite) {
  SamplingParams p;
  p.temperature = 1e-30f;  // 1 / t overflows: treated as greedy (below 1e-5, as vLLM)
  Sampler s = Make(p, 3);
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(SampleOne(s, {1.0f, 1.0001f, 0.5f}, {}, std::vector<int32_t>(i, 2)), 1);
  p.temperature = 1;
  p.repetition_penalty = 1e-39f;  // 1.0 / 1e-39 overflows float: clamped to the largest finite value
  Sampler t = Make(p, 3);
  std::vector<int32_t> out;  // tokens 0 and 2 both become the largest float: drawn half and half
  for (int i = 0; i < 200; ++i) out.push_back(SampleOne(t, {1.0f, 5.0f, 2.0f}, {0, 2}, out));
  EXPECT_EQ(std::count(out.begin(), out.end(), 1), 0);
  EXPECT_GT(std::count(out.begin(), out.end(), 0), 50);
  EXPECT_GT(std::count(out.begin(), out.end(), 2), 50);
}

TEST(SamplerTest, SeededDrawsAreReproducibleAndSeedsDiffer) {
  std::vector<float> logits(1000);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0, 1);
  for (float& v : logits) v = normal(rng);
  auto run = [&](SamplingParams p, uint64_t default_seed) {
    Sampler s = Make(p, 1000, default_seed);
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) out.push_back(SampleOne(s, logits, {}, out));
    return out;
  };
  SamplingParams p;
  p.top_p = 0.95f;
  EXPECT_EQ(run(p, 11), run(p, 11));
  EXPECT_NE(run(p, 11), run(p, 12));
  p.seed = 99;  // the request's seed overrides the engine's
  EXPECT_EQ(run(p, 11), run(p, 12));
  // The draw at a position depends on the seed and the position only, not on earlier calls.
  Sampler a = Make(p, 1000);
  Sampler b = Make(p, 1000);
  const std::vector<int32_t> prefix = {1, 2, 3};
  SampleOne(a, logits, {}, {});
  EXPECT_EQ(SampleOne(a, logits, {}, prefix), SampleOne(b, logits, {}, prefix));
}

TEST(SamplerTest, InterleavedRequestsDrawAsIfAlone) {
  // Two requests with different vocabularies and settings share a thread (and its scratch).
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0, 1.5f);
  std::vector<float> a_logits(5000), b_logits(777);
  for (float& v : a_logits) v = normal(rng);
  for (float& v : b_logits) v = normal(rng);
  SamplingParams a, b;
  a.top_p = 0.8f, a.logprobs = 2, a.repetition_penalty = 1.3f;
  b.top_k = 40, b.temperature = 0.7f, b.min_p = 0.05f;
  auto alone = [](const SamplingParams& p, const std::vector<float>& logits) {
    Sampler s = Make(p, static_cast<int64_t>(logits.size()), 5);
    std::vector<int32_t> out;
    for (int i = 0; i < 40; ++i) out.push_back(SampleOne(s, logits, {1, 2}, out));
    return out;
  };
  Sampler sa = Make(a, 5000, 5), sb = Make(b, 777, 5);
  std::vector<int32_t> out_a, out_b;
  for (int i = 0; i < 40; ++i) {
    out_a.push_back(SampleOne(sa, a_logits, {1, 2}, out_a));
    out_b.push_back(SampleOne(sb, b_logits, {1, 2}, out_b));
  }
  EXPECT_EQ(out_a, alone(a, a_logits));
  EXPECT_EQ(out_b, alone(b, b_logits));
}

TEST(SamplerTest, MinTokensMasksStopAndEosIds) {
  SamplingParams p;
  p.temperature = 0;
  p.min_tokens = 2;
  p.stop_token_ids = {1};
  const std::vector<float> logits = {0, 5, 9, 1};  // eos 2 first, stop id 1 next
  Sampler s = Make(p, 4, 0, {2});
  EXPECT_EQ(SampleOne(s, logits, {}, {}), 3);
  EXPECT_EQ(SampleOne(s, logits, {}, {3}), 3);
  EXPECT_EQ(SampleOne(s, logits, {}, {3, 3}), 2);
  p.ignore_eos = true;  // eos is then an ordinary token, never masked
  Sampler t = Make(p, 4, 0, {2});
  EXPECT_EQ(SampleOne(t, logits, {}, {}), 2);
}

TEST(SamplerTest, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 1.2f;
  Sampler s = Make(p, 3);
  // Token 0 in the prompt: 1.0 / 1.2 = 0.833 < 0.9.
  EXPECT_EQ(SampleOne(s, {1.0f, 0.9f, -5}, {0}, {}), 1);
  p.repetition_penalty = 1.05f;  // 1.0 / 1.05 = 0.952 > 0.9
  Sampler t = Make(p, 3);
  EXPECT_EQ(SampleOne(t, {1.0f, 0.9f, -5}, {0}, {}), 0);
  // Negative logits: an output token at -1.0 becomes -1.2 < -1.1.
  p.repetition_penalty = 1.2f;
  Sampler u = Make(p, 3);
  EXPECT_EQ(SampleOne(u, {-1.0f, -1.1f, -5}, {}, {0}), 1);
  // A penalty below 1 rewards repetition.
  p.repetition_penalty = 0.5f;
  Sampler v = Make(p, 3);
  EXPECT_EQ(SampleOne(v, {1.0f, 1.9f, -5}, {2, 0}, {}), 0);
}

TEST(SamplerTest, FrequencyAndPresencePenaltiesCountOutputTokensOnly) {
  SamplingParams p;
  p.temperature = 0;
  p.frequency_penalty = 0.5f;
  Sampler s = Make(p, 3);
  // Token 0 appears twice in the output: 2.0 - 2 * 0.5 = 1.0 < 1.5; the prompt does not count.
  EXPECT_EQ(SampleOne(s, {2.0f, 1.5f, 0}, {0, 0, 0}, {0, 2, 0}), 1);
  EXPECT_EQ(SampleOne(s, {2.0f, 0.9f, 0}, {0, 0, 0}, {0, 2, 0, 2}), 0);  // counts grow incrementally
  p.frequency_penalty = 0;
  p.presence_penalty = 0.7f;  // once per distinct token: 2.0 - 0.7 = 1.3 < 1.5 whatever the count
  Sampler t = Make(p, 3);
  EXPECT_EQ(SampleOne(t, {2.0f, 1.5f, 0}, {}, {0}), 1);
  EXPECT_EQ(SampleOne(t, {2.0f, 1.2f, 0}, {}, {0, 0, 0, 0}), 0);
  // A shorter output than last time (a new stream) recounts from scratch.
  EXPECT_EQ(SampleOne(t, {2.0f, 1.5f, 0}, {}, {}), 0);
}

}  // namespace
}  // namespace tandem::engine::runtime
