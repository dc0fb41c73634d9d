#pragma once
// Named model shapes for `--load-format dummy`, memory math and tests (docs/model.md):
//   kimi-k2.6  Kimi K2.6's text model (deepseek_v3 shape, FACTS.md), full size: memory math only
//   glm-5.2    GLM 5.2 (glm_moe_dsa, FACTS.md), full size: memory math only
//   tiny       deepseek_v3, ~1M parameters (2 MB bf16): unit tests, the Python reference check
//   tiny-glm   glm_moe_dsa with a DSA indexer, ~1M parameters
//   bench      deepseek_v3 with Kimi's 384 experts / top-8 and Kimi's ratio of routed-expert to
//              non-expert parameters (~87), ~0.23B parameters (460 MB bf16): benchmarks
//   bench-wide bench at hidden 1024 (experts 1024 x 256), same ratio (~86), ~0.92B parameters
//              (1.8 GB bf16, 0.53 GB int4): batch-1 bandwidth benchmarks with matrices long enough
//              to stream
//   bench-glm  glm_moe_dsa (DSA indexer on every layer) with GLM's 256 experts / top-8 and GLM's
//              routed-expert to non-expert ratio (~38) at bench's width: the GLM-shaped benchmarks

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/model/model_config.h"

namespace tandem::engine::model {

// The preset called `name`; InvalidArgument listing the names otherwise.
StatusOr<ModelConfig> Preset(std::string_view name);
std::vector<std::string> PresetNames();

// A Markdown table, one row per config: parameters (total, routed-expert, active per token),
// checkpoint bytes in each WeightScheme (bf16, fp8, int4, int4+fp8), KV bytes per token per
// layer (BF16 / FP8) and per token over all layers. Sizes in GB (1e9) or MB (1e6) as they fit.
std::string MemoryTable(const std::vector<std::pair<std::string, ModelConfig>>& rows);

}  // namespace tandem::engine::model
