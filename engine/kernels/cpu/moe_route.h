#pragma once
// DeepSeek-V3 / GLM MoE routing (the Backend's MoeRoute on the CPU): for each token, from its router
// logits, the experts it goes to and their gate weights. Scores are sigmoid (or softmax) of the
// logits in double; the e_score_correction_bias (optional) is added for the choice only; noaux_tc
// ranks n_group groups by the sum of their two best biased scores (group_limited_greedy: by the
// best), keeps topk_group of them and picks the top_k experts among those (greedy: no groups); ties
// go to the lower index. Gates: the chosen experts' unbiased scores, divided by their sum when
// norm_top_k, times scaling. A discrete choice computed the same way everywhere: its own oracle.

#include <cstdint>

namespace tandem::engine::kernels::cpu {

struct MoeRouting {
  enum class Groups { kNone, kSumOfTwoBest, kBest };  // greedy, noaux_tc, group_limited_greedy
  int64_t experts = 0;                                // n_routed_experts
  int64_t top_k = 0;                                  // num_experts_per_tok (<= experts)
  int64_t groups = 1;                                 // n_group (divides experts)
  int64_t top_groups = 1;                             // topk_group
  Groups group_score = Groups::kSumOfTwoBest;
  bool sigmoid = true;     // else softmax over the experts
  bool norm_top_k = true;  // gates divided by their sum
  double scaling = 1.0;    // routed_scaling_factor
};

// logits [tokens, experts]; bias [experts] or null; experts_out and gates_out [tokens, top_k], each
// token's experts in selection order (best first).
void MoeRoute(const MoeRouting& r, const float* logits, int64_t tokens, const float* bias,
              int32_t* experts_out, float* gates_out);

}  // namespace tandem::engine::kernels::cpu
