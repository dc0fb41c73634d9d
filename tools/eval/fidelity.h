#pragma once
// `tandem eval fidelity`: how far each precision configuration of one checkpoint is from its BF16
// reference, measured in-process through the engine's forward pass (prefill in the expanded MLA
// form, decode token by token in the absorbed form over paged KV, as serving runs them):
//   - per-token KL divergence KL(P_bf16 || P_config) and top-1 agreement, on every prompt token and on
//     a continuation the reference wrote greedily (teacher-forced, so every configuration is judged
//     on the same tokens);
//   - the greedy exact-match length: tokens of its own greedy continuation that equal the
//     reference's before the first difference;
//   - perplexity on a text (chunked prefill over paged KV).
// Configurations: weights bf16/fp8/int4 x KV bf16/fp8_e4m3, and production's P/D split: prefill
// with FP8 weights and a BF16 cache, the pages converted to FP8 e4m3 as a transfer does
// (kv::PageConverter), decode with INT4 weights over them.

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/core/dtype.h"

namespace tandem::tools::eval {

struct FidelityConfig {
  std::string name;  // "bf16", "fp8-kv", "int4+fp8-kv", "pd-split", ...
  engine::WeightFormat prefill_weights = engine::WeightFormat::kBf16;
  engine::KvCacheDtype prefill_kv = engine::KvCacheDtype::kBf16;
  engine::WeightFormat decode_weights = engine::WeightFormat::kBf16;
  engine::KvCacheDtype decode_kv = engine::KvCacheDtype::kBf16;
  bool split() const { return prefill_weights != decode_weights || prefill_kv != decode_kv; }
};

// bf16 (the reference) first, then every weights x KV pair, then the P/D split.
std::vector<FidelityConfig> FidelityConfigs();

struct FidelityOptions {
  std::string model_dir;
  std::vector<std::vector<int32_t>> prompts;  // token ids
  std::vector<int32_t> text;                  // perplexity text, token ids (empty: none)
  int continuation_tokens = 32;
  int perplexity_window = 256;  // tokens per perplexity window, prefilled in chunks of 16
  int threads = 0;
  std::vector<std::string> configs;  // names to run (empty: all)
};

struct FidelityRow {
  std::string config;
  int64_t positions = 0;  // token positions compared
  double mean_kl = 0, p99_kl = 0, max_kl = 0;
  double top1_agreement = 0;  // share of positions whose argmax equals the reference's
  // The same on the prompt's positions (the prefill side) and on the continuation's (the decode
  // side: what a P/D split changes).
  double prompt_kl = 0, continuation_kl = 0;
  double prompt_top1 = 0, continuation_top1 = 0;
  double mean_exact_match = 0;  // greedy tokens equal to the reference's, mean over prompts
  int64_t full_matches = 0;     // prompts whose whole continuation matched
  double perplexity = 0;        // 0: no text
};

// Runs the reference and every configuration. Errors: loading, quantizing, or a forward step.
StatusOr<std::vector<FidelityRow>> RunFidelity(const FidelityOptions& options);

}  // namespace tandem::tools::eval
