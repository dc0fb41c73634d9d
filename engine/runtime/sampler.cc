#include "engine/runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "common/hash.h"
#include "engine/runtime/sampler_select.h"
#include "engine/text/detokenizer.h"

namespace tandem::engine::runtime {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kPosInf = std::numeric_limits<float>::infinity();

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

Status Bad(std::string_view field, std::string_view want, double got) {
  return Status::InvalidArgument(std::string(field) + " must be " + std::string(want) + ", got " + Num(got));
}

// The n-th output of the splitmix64 generator seeded with `seed`, as a double in [0, 1).
double UniformAt(uint64_t seed, uint64_t n) {
  return static_cast<double>(SplitMix64At(seed, n) >> 11) * 0x1.0p-53;
}

}  // namespace

Status ValidateSamplingParams(const SamplingParams& p, int64_t vocab_size) {
  if (!(p.temperature >= 0) || !std::isfinite(p.temperature))
    return Bad("temperature", "a finite number >= 0", p.temperature);
  if (p.top_k < 0) return Bad("top_k", ">= 0 (0 = off)", p.top_k);
  if (!(p.top_p > 0 && p.top_p <= 1)) return Bad("top_p", "in (0, 1]", p.top_p);
  if (!(p.min_p >= 0 && p.min_p <= 1)) return Bad("min_p", "in [0, 1]", p.min_p);
  if (!(p.repetition_penalty > 0) || !std::isfinite(p.repetition_penalty))
    return Bad("repetition_penalty", "a finite number > 0", p.repetition_penalty);
  if (!(p.frequency_penalty >= -2 && p.frequency_penalty <= 2))
    return Bad("frequency_penalty", "in [-2, 2]", p.frequency_penalty);
  if (!(p.presence_penalty >= -2 && p.presence_penalty <= 2))
    return Bad("presence_penalty", "in [-2, 2]", p.presence_penalty);
  if (p.max_tokens < 1) return Bad("max_tokens", ">= 1", p.max_tokens);
  if (p.min_tokens < 0 || p.min_tokens > p.max_tokens)
    return Bad("min_tokens", "in [0, max_tokens = " + std::to_string(p.max_tokens) + "]", p.min_tokens);
  if (p.logprobs < -1 || p.logprobs > kMaxLogprobs)
    return Bad("logprobs", "in [-1, " + std::to_string(kMaxLogprobs) + "] (-1 = none)", p.logprobs);
  for (size_t i = 0; i < p.stop_token_ids.size(); ++i) {
    if (p.stop_token_ids[i] < 0 || p.stop_token_ids[i] >= vocab_size)
      return Bad("stop_token_ids[" + std::to_string(i) + "]",
                 "a token id in [0, " + std::to_string(vocab_size) + ")", p.stop_token_ids[i]);
  }
  if (p.stop.size() > kMaxStopStrings)
    return Bad("stop", "at most " + std::to_string(kMaxStopStrings) + " strings",
               static_cast<double>(p.stop.size()));
  for (size_t i = 0; i < p.stop.size(); ++i) {
    const std::string field = "stop[" + std::to_string(i) + "]";
    if (p.stop[i].empty()) return Status::InvalidArgument(field + " must not be empty");
    if (text::ToValidUtf8(p.stop[i]) != p.stop[i])
      return Status::InvalidArgument(field + " is not valid UTF-8");
  }
  return Status::Ok();
}

StatusOr<Sampler> Sampler::Create(const SamplingParams& params, int64_t vocab_size, uint64_t default_seed,
                                  std::span<const int32_t> eos_token_ids) {
  if (vocab_size < 1 || vocab_size > std::numeric_limits<int32_t>::max())
    return Status::InvalidArgument("vocab_size must be in [1, 2^31), got " + std::to_string(vocab_size));
  RETURN_IF_ERROR(ValidateSamplingParams(params, vocab_size));
  std::vector<int32_t> masked(params.stop_token_ids.begin(), params.stop_token_ids.end());
  if (!params.ignore_eos) {
    for (int32_t id : eos_token_ids)
      if (id >= 0 && id < vocab_size) masked.push_back(id);
  }
  std::sort(masked.begin(), masked.end());
  masked.erase(std::unique(masked.begin(), masked.end()), masked.end());
  return Sampler(params, vocab_size, params.seed.value_or(default_seed), std::move(masked));
}

Sampler::Sampler(const SamplingParams& params, int64_t vocab_size, uint64_t seed,
                 std::vector<int32_t> masked_early)
    : params_(params), vocab_size_(vocab_size), seed_(seed), masked_early_(std::move(masked_early)) {}

void Sampler::UpdateCounts(std::span<const int32_t> prompt_tokens, std::span<const int32_t> output_tokens) {
  const bool repetition = params_.repetition_penalty != 1.0f;
  if (!repetition && params_.frequency_penalty == 0.0f && params_.presence_penalty == 0.0f) return;
  if (repetition && (!prompt_done_ || prompt_tokens.size() != prompt_size_seen_)) {
    prompt_unique_.clear();
    for (int32_t t : prompt_tokens)
      if (t >= 0 && t < vocab_size_) prompt_unique_.push_back(t);
    std::sort(prompt_unique_.begin(), prompt_unique_.end());
    prompt_unique_.erase(std::unique(prompt_unique_.begin(), prompt_unique_.end()), prompt_unique_.end());
    prompt_size_seen_ = prompt_tokens.size();
    prompt_done_ = true;
  }
  if (output_tokens.size() < counted_outputs_) {
    output_counts_.clear();
    counted_outputs_ = 0;
  }
  for (size_t i = counted_outputs_; i < output_tokens.size(); ++i) {
    const int32_t t = output_tokens[i];
    if (t < 0 || t >= vocab_size_) continue;
    auto it = std::lower_bound(output_counts_.begin(), output_counts_.end(), std::make_pair(t, 0));
    if (it != output_counts_.end() && it->first == t) {
      ++it->second;
    } else {
      output_counts_.insert(it, {t, 1});
    }
  }
  counted_outputs_ = output_tokens.size();
}

void Sampler::ApplyPenalties(float* x) const {
  const float rp = params_.repetition_penalty;
  auto repeat = [&](int32_t t) {
    const float v = x[t];
    // A tiny penalty could overflow a positive logit to +inf; keep it the largest finite value.
    x[t] = v > 0 ? std::min(v / rp, std::numeric_limits<float>::max()) : v * rp;
  };
  if (rp != 1.0f) {
    for (int32_t t : prompt_unique_) repeat(t);
    for (const auto& [t, count] : output_counts_)
      if (!std::binary_search(prompt_unique_.begin(), prompt_unique_.end(), t)) repeat(t);
  }
  if (params_.frequency_penalty != 0.0f || params_.presence_penalty != 0.0f) {
    for (const auto& [t, count] : output_counts_)
      x[t] -= params_.frequency_penalty * static_cast<float>(count) + params_.presence_penalty;
  }
}

StatusOr<SampleResult> Sampler::Sample(std::span<const float> logits, std::span<const int32_t> prompt_tokens,
                                       std::span<const int32_t> output_tokens) {
  if (static_cast<int64_t>(logits.size()) != vocab_size_) {
    return Status::InvalidArgument("logits row has " + std::to_string(logits.size()) +
                                   " entries, vocab_size is " + std::to_string(vocab_size_));
  }
  UpdateCounts(prompt_tokens, output_tokens);
  const int64_t n = vocab_size_;
  const float* raw = logits.data();
  const bool greedy = params_.temperature < kGreedyBelowTemperature;
  const bool mask = static_cast<int64_t>(output_tokens.size()) < params_.min_tokens && !masked_early_.empty();
  const bool penalties_requested = params_.repetition_penalty != 1.0f || params_.frequency_penalty != 0.0f ||
                                   params_.presence_penalty != 0.0f;
  // Plain greedy: one pass over the raw row (Argmax skips NaN and takes the first +inf).
  const bool plain_greedy = greedy && !mask && !penalties_requested;
  int64_t num_pos_inf = 0;
  if (params_.logprobs >= 0 || !plain_greedy) {
    for (int64_t i = 0; i < n; ++i) num_pos_inf += raw[i] == kPosInf;
  }

  SampleResult result;
  double log_z = 0;  // log of the raw row's normaliser (log-sum-exp)
  if (params_.logprobs >= 0) {
    log_z = LogSumExp(raw, n, num_pos_inf, ThreadSamplerScratch(n).w.data());
    std::vector<int32_t> top;
    SelectTop(raw, n, params_.logprobs, &top);
    for (int32_t t : top) result.top_logprobs.push_back({t, RawLogprob(raw[t], log_z, num_pos_inf)});
  }

  StatusOr<int32_t> token = 0;
  if (plain_greedy) {
    token = Argmax(raw, n);
  } else {
    // The working row: NaN -> -inf; with any +inf, the +inf tokens are the (uniform) distribution
    // and penalties do not apply.
    SamplerScratch& s = ThreadSamplerScratch(n);
    float* x = s.x.data();
    if (num_pos_inf > 0) {
      for (int64_t i = 0; i < n; ++i) x[i] = raw[i] == kPosInf ? 0.0f : kNegInf;
    } else {
      for (int64_t i = 0; i < n; ++i) x[i] = std::isnan(raw[i]) ? kNegInf : raw[i];
      if (penalties_requested) ApplyPenalties(x);
    }
    if (mask) {
      for (int32_t t : masked_early_) x[t] = kNegInf;
    }
    token = greedy ? Argmax(x, n) : Draw(x, n, params_, UniformAt(seed_, output_tokens.size()), &s);
  }
  RETURN_IF_ERROR(token.status());
  result.token = *token;
  if (params_.logprobs >= 0) result.logprob = RawLogprob(raw[*token], log_z, num_pos_inf);
  return result;
}

}  // namespace tandem::engine::runtime
