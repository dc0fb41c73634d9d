#pragma once
// Per-request token sampling: penalties, temperature, top-k / top-p / min-p truncation, a seeded
// reproducible draw, and logprobs of the model's raw distribution.
//
// Order (as vLLM): repetition penalty (HF-style, over prompt + output tokens), frequency and
// presence penalties (OpenAI-style, over output tokens), temperature; then greedy argmax when
// temperature < kGreedyBelowTemperature (1e-5, as vLLM; 0 = greedy), else top-k, top-p (over the
// top-k renormalised distribution), min-p (p >= min_p * p_max), draw. (vLLM v1 applies min-p before
// top-k/top-p; the two orders differ only in the mass top-p sees.)
// Before `min_tokens` output tokens exist, the stop token ids and (unless ignore_eos) the
// end-of-sequence ids are masked so they cannot be sampled (vLLM's min_tokens semantics).
//
// Non-finite logits: NaN counts as -inf (never sampled). When some logits are +inf, the draw is
// uniform over those tokens (greedy: the lowest of them) and their raw logprob is -log(count).
// A row with no token left to sample (all -inf / NaN after masking) is an InvalidArgument error,
// never a crash, so the caller can abort that one request.
//
// The draw for output position n uses one uniform number derived from (seed, n) by a splitmix64
// hash, so a request's samples depend only on its seed, its logits and its position: not on the
// batch it shares, how often it was preempted and recomputed, or the platform: the weights come
// from a libm-free expf approximation built without FMA contraction (sampler_select.h), so every
// platform computes the same bits. (Reported logprobs go through libm's log: last-bit differences.)

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "common/status.h"
#include "engine/runtime/request_types.h"

namespace tandem::engine::runtime {

inline constexpr int32_t kMaxLogprobs = 20;
inline constexpr float kGreedyBelowTemperature = 1e-5f;
inline constexpr size_t kMaxStopStrings = 16;

// OK, or InvalidArgument naming the first out-of-range field of `params` (e.g. "top_p must be in
// (0, 1], got 0"). `vocab_size` bounds stop_token_ids. Stop strings must be non-empty valid UTF-8.
Status ValidateSamplingParams(const SamplingParams& params, int64_t vocab_size);

// One sampled token.
struct SampleResult {
  int32_t token = 0;
  // When params.logprobs >= 0: the token's natural-log probability under the raw logits
  // (log_softmax of the unmodified row), and the top `params.logprobs` tokens of that distribution,
  // most likely first, ties to the lower id. Otherwise 0 and empty.
  float logprob = 0.0f;
  std::vector<TokenLogprob> top_logprobs;
};

// The sampler of one request. Holds the request's parameters, its seed and the output-token counts
// the penalties need; vocabulary-sized scratch is per thread, not per request. Not thread-safe:
// one request's Sample calls happen one at a time (different requests may sample concurrently).
class Sampler {
 public:
  // Validates `params` (ValidateSamplingParams) and builds the sampler. The seed is params.seed when
  // set, else `default_seed` (the engine's per-request seed). `eos_token_ids` are the model's
  // end-of-sequence ids, masked with the stop token ids before min_tokens unless ignore_eos.
  static StatusOr<Sampler> Create(const SamplingParams& params, int64_t vocab_size, uint64_t default_seed,
                                  std::span<const int32_t> eos_token_ids = {});

  // Samples the next token from `logits` ([vocab_size] fp32, one row, unmodified model output).
  // `prompt_tokens` are the request's prompt ids; `output_tokens` the ids generated so far (its
  // size is the position of the token being sampled).
  // REQUIRES: successive calls pass the same prompt and an `output_tokens` that extends (or equals)
  // the previous call's; a shorter one makes the sampler recount from scratch.
  // InvalidArgument when logits.size() != vocab_size or no token can be sampled.
  StatusOr<SampleResult> Sample(std::span<const float> logits, std::span<const int32_t> prompt_tokens,
                                std::span<const int32_t> output_tokens);

  uint64_t seed() const { return seed_; }
  const SamplingParams& params() const { return params_; }

 private:
  Sampler(const SamplingParams& params, int64_t vocab_size, uint64_t seed, std::vector<int32_t> masked_early);
  // Brings the output counts and the prompt's unique-token list up to date.
  void UpdateCounts(std::span<const int32_t> prompt_tokens, std::span<const int32_t> output_tokens);
  // Repetition, frequency and presence penalties on `x` ([vocab_size], in place).
  void ApplyPenalties(float* x) const;

  SamplingParams params_;
  int64_t vocab_size_;
  uint64_t seed_;
  std::vector<int32_t> masked_early_;  // sorted stop/eos ids masked while output < min_tokens
  // Penalty state: (token, count) of the output tokens, sorted by token; the prompt's distinct
  // tokens, sorted (filled on the first call when repetition_penalty != 1).
  std::vector<std::pair<int32_t, int32_t>> output_counts_;
  size_t counted_outputs_ = 0;
  std::vector<int32_t> prompt_unique_;
  size_t prompt_size_seen_ = 0;
  bool prompt_done_ = false;
};

}  // namespace tandem::engine::runtime
