#pragma once
// The feed-forward half of a layer: SwiGLU MLPs (dense layers, shared experts, routed experts)
// and DeepSeek-V3 / GLM routing (sigmoid scores, e_score_correction_bias for selection only,
// group-limited top-k, norm_topk_prob, routed_scaling_factor).

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "engine/kernels/backend.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"

namespace tandem::engine::model {

// The experts one token goes to and their gate weights (routed_scaling_factor included).
struct Routing {
  std::vector<int32_t> experts;  // [num_experts_per_tok], in selection order
  std::vector<float> gates;      // [num_experts_per_tok]
};

// Routes one token from its router logits ([n_routed_experts], x · routerᵀ). `bias`
// ([n_routed_experts]) may be null (no e_score_correction_bias). Selection: scores (sigmoid or
// softmax) + bias, split into n_group groups; noaux_tc ranks groups by the sum of their two best
// biased scores (group_limited_greedy: by the best), keeps topk_group groups and picks the top
// num_experts_per_tok experts among them (greedy: no groups). Ties go to the lower index.
// Gates: the unbiased scores of the chosen experts, divided by their sum when norm_topk_prob,
// times routed_scaling_factor.
Routing RouteToken(const ModelConfig& config, const float* router_logits, const float* bias);
// The config's routing as the kernels take it (kernels/cpu/moe_route.h).
kernels::cpu::MoeRouting RoutingOf(const ModelConfig& config);

// y[T, hidden] = down(silu(gate x) * up x) for x [T, hidden], on `be`.
Status MlpForward(const MlpWeights& w, const float* x, int64_t tokens, float* y, const kernels::Backend& be);

// y[T, hidden] = shared experts(x) + Σ_k gate_k · expert_k(x), routing each token. x: [T, hidden].
// The router logits of every token in one op (Backend::MatmulF32), the choice of experts on the
// host (RouteToken), every expert's Linears in two batches (gate and up, then down), the gated
// sum by Backend::AddScaled in a fixed order (shared expert, then routed experts by index).
// Routed experts absent from w (rows() == 0: another rank's, expert parallelism) are skipped.
// routed_pairs (optional) grows by the (token, expert) pairs run here.
Status MoeForward(const ModelConfig& config, const MoeWeights& w, const float* x, int64_t tokens, float* y,
                  const kernels::Backend& be, int64_t* routed_pairs = nullptr);

}  // namespace tandem::engine::model
