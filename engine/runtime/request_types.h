#pragma once
// The vocabulary shared by the serving runtime (scheduler, sampler, output processing, the Engine
// API): request ids, sampling parameters, finish reasons and what a step returns per request.
// Plain structs only, so the agent can fill them from an HTTP body without any engine internals.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/kv/kv_types.h"

namespace tandem::engine::runtime {

using RequestId = kv::RequestId;

// Why a request ended. Every request ends exactly once with one of these.
enum class FinishReason : uint8_t {
  kStop = 0,       // an end-of-sequence token, a stop token id or a stop string
  kLength = 1,     // max_tokens generated, or the model's context limit reached
  kAbort = 2,      // the engine aborted it (integrity mismatch, a KV transfer failure, an error)
  kCancelled = 3,  // the client cancelled it (Engine::Cancel)
  kRejected = 4,   // it can never run (e.g. the prompt needs more KV pages than the pool has)
};

constexpr std::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kRejected: return "rejected";
  }
  return "unknown";
}

// OpenAI / vLLM-style sampling parameters of one request. Defaults sample from the full
// distribution at temperature 1 and generate up to 16 tokens.
struct SamplingParams {
  float temperature = 1.0f;         // 0 = greedy (argmax; ties go to the lowest token id)
  int32_t top_k = 0;                // 0 = off; else keep the k most likely tokens
  float top_p = 1.0f;               // (0, 1]; 1 = off
  float min_p = 0.0f;               // [0, 1]; keep tokens with p >= min_p * p_max
  float repetition_penalty = 1.0f;  // > 0; HF-style over prompt and output tokens; 1 = off
  float frequency_penalty = 0.0f;   // [-2, 2]; OpenAI-style over output tokens
  float presence_penalty = 0.0f;    // [-2, 2]; OpenAI-style over output tokens
  std::optional<uint64_t> seed;     // set: the request's samples are reproducible
  int32_t max_tokens = 16;          // >= 1 tokens to generate
  int32_t min_tokens = 0;           // end-of-sequence and stop token ids are ignored before this
  std::vector<std::string> stop;    // stop strings (never part of the returned text)
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  // false: special tokens stay in the text, as the tool-call markers of Kimi K2 (special tokens) must
  // for the tool-call parser to see them; true (vLLM's default) drops them.
  bool skip_special_tokens = true;
  int32_t logprobs = -1;  // -1 = none; 0..20: the sampled token's logprob plus this many top ones
};

// One alternative with its log-probability: natural log of the model's raw distribution (before
// temperature, penalties and truncation), as vLLM reports logprobs by default.
struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

// What one Engine::Step produced for one request.
struct RequestOutput {
  RequestId id = 0;
  std::vector<int32_t> new_tokens;                      // sampled this step (0 or 1 today)
  std::vector<float> new_token_logprobs;                // parallel to new_tokens when logprobs >= 0
  std::vector<std::vector<TokenLogprob>> top_logprobs;  // parallel to new_tokens, top-n each
  std::string text_delta;                               // detokenized text safe to stream (may be empty)
  std::optional<FinishReason> finish;                   // set exactly once, on the request's last output
  std::string finish_detail;                            // e.g. the matched stop string, an abort reason
  // On the output that carries a request's first generated token: how many of its prompt tokens
  // were served from the prefix cache (usage.prompt_tokens_details.cached_tokens); 0 otherwise.
  int64_t cached_prompt_tokens = 0;
  // Prefill-only role: the request's KV was handed off to a decode engine (Engine::FinishExport);
  // this is its last output here, and `finish` stays unset (the decode side finishes it).
  bool exported = false;
};

}  // namespace tandem::engine::runtime
