#pragma once
// The precision configurations `tandem eval` compares: weights bf16/fp8/int4 and KV cache
// bf16/fp8_e4m3 per pool, as `tandem local` flags, with production's P/D split among them.

#include <string>
#include <vector>

#include "common/status.h"

namespace tandem::tools::eval {

struct PrecisionConfig {
  std::string name;                      // "bf16", "fp8-kv", "int4", "fp8", "pd-split"
  std::string description;               // "prefill fp8 weights + bf16 KV, decode int4 weights + fp8_e4m3 KV"
  std::vector<std::string> local_flags;  // --prefill-weights ... for `tandem local`
};

// Every configuration, the reference (bf16) first.
const std::vector<PrecisionConfig>& AllConfigs();
// bf16, fp8-kv, int4, pd-split.
std::vector<std::string> DefaultConfigNames();
// The named configurations in the given order. Errors: InvalidArgument naming an unknown one.
StatusOr<std::vector<PrecisionConfig>> PickConfigs(const std::vector<std::string>& names);

}  // namespace tandem::tools::eval
