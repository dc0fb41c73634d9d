#include "engine/model/moe.h"

#include <algorithm>
#include <numeric>

namespace tandem::engine::model {

kernels::cpu::MoeRouting RoutingOf(const ModelConfig& config) {
  kernels::cpu::MoeRouting r;
  r.experts = config.n_routed_experts;
  r.top_k = config.num_experts_per_tok;
  r.groups = config.n_group;
  r.top_groups = config.topk_group;
  r.group_score = config.topk_method == TopkMethod::kGreedy ? kernels::cpu::MoeRouting::Groups::kNone
                  : config.topk_method == TopkMethod::kNoAuxTc
                      ? kernels::cpu::MoeRouting::Groups::kSumOfTwoBest
                      : kernels::cpu::MoeRouting::Groups::kBest;
  r.sigmoid = config.scoring_func == ScoringFunc::kSigmoid;
  r.norm_top_k = config.norm_topk_prob;
  r.scaling = config.routed_scaling_factor;
  return r;
}

Routing RouteToken(const ModelConfig& config, const float* router_logits, const float* bias) {
  Routing r;
  r.experts.resize(config.num_experts_per_tok);
  r.gates.resize(config.num_experts_per_tok);
  kernels::cpu::MoeRoute(RoutingOf(config), router_logits, 1, bias, r.experts.data(), r.gates.data());
  return r;
}

Status MlpForward(const MlpWeights& w, const float* x, int64_t tokens, float* y, const kernels::Backend& be) {
  const int64_t inter = w.gate_proj.rows();
  std::vector<float> gate(tokens * inter), up(tokens * inter);
  // gate and up read the same x: one job over both matrices' rows.
  const kernels::cpu::MatmulTask gate_up[] = {{&w.gate_proj, x, tokens, gate.data()},
                                              {&w.up_proj, x, tokens, up.data()}};
  RETURN_IF_ERROR(be.MatmulBatch(gate_up));
  be.SiluMul(gate.data(), up.data(), tokens * inter);
  return be.Matmul(w.down_proj, gate.data(), tokens, y);
}

namespace {

// One expert's share of a step: its tokens, their rows of x (gathered unless they are all of x in
// order), the SwiGLU intermediates and its output before gating.
struct ExpertWork {
  const MlpWeights* weights = nullptr;
  std::vector<std::pair<int64_t, float>> routed;  // (token, gate)
  const float* x = nullptr;                       // [m, hidden]
  std::vector<float> xs;                          // the gathered rows x points to, when gathered
  std::vector<float> gate, up;                    // [m, inter]
  std::vector<float> ys;                          // [m, hidden]
  float* y = nullptr;                             // ys, or the layer output for the shared expert
  int64_t m() const { return static_cast<int64_t>(routed.size()); }
};

}  // namespace

Status MoeForward(const ModelConfig& config, const MoeWeights& w, const float* x, int64_t tokens, float* y,
                  const kernels::Backend& be, int64_t* routed_pairs) {
  const int64_t hidden = config.hidden_size;
  const int64_t n_exp = config.n_routed_experts;
  // Router logits in fp32, as Hugging Face computes them: within ~1e-6 relative of the exact sum,
  // far inside the smallest routing gaps of the reference models (6e-5).
  const float* bias = w.e_score_correction_bias.size() > 0 ? w.e_score_correction_bias.data() : nullptr;
  std::vector<std::vector<std::pair<int64_t, float>>> by_expert(n_exp);  // (token, gate)
  const int64_t top_k = config.num_experts_per_tok;
  std::vector<float> logits(tokens * n_exp), gates(tokens * top_k);
  std::vector<int32_t> chosen(tokens * top_k);
  be.MatmulF32(w.router.data(), n_exp, hidden, x, tokens, logits.data());
  be.MoeRoute(RoutingOf(config), logits.data(), tokens, bias, chosen.data(), gates.data());
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t k = 0; k < top_k; ++k) by_expert[chosen[t * top_k + k]].push_back({t, gates[t * top_k + k]});
  }
  // Every expert with tokens (the shared one included) in two jobs: gate and up of all of them,
  // then down of all of them. MatmulBatch splits the rows of all those matrices over the threads
  // together: at decode each expert is a few GEMVs of a few hundred rows, far too little to wake
  // the pool for one by one, and whole experts per thread would balance only when the experts
  // are equally large (the shared expert is bf16 where routed ones are int4). Each output is what
  // a Matmul per matrix gives, bit for bit.
  std::vector<ExpertWork> work;
  const bool shared = w.shared_experts.gate_proj.rows() > 0;
  if (shared) {
    ExpertWork& s = work.emplace_back();
    s.weights = &w.shared_experts;
    s.routed.resize(tokens);
    s.x = x;
    s.y = y;
  } else {
    std::fill(y, y + tokens * hidden, 0.0f);
  }
  for (int64_t e = 0; e < n_exp; ++e) {
    // An expert absent here lives on another rank (expert parallelism): its tokens are that rank's.
    if (by_expert[e].empty() || w.experts[e].gate_proj.rows() == 0) continue;
    ExpertWork& ew = work.emplace_back();
    ew.weights = &w.experts[e];
    ew.routed = std::move(by_expert[e]);
    if (routed_pairs != nullptr) *routed_pairs += ew.m();
    bool all_in_order = ew.m() == tokens;
    for (int64_t j = 0; all_in_order && j < ew.m(); ++j) all_in_order = ew.routed[j].first == j;
    if (all_in_order) {
      ew.x = x;
    } else {
      ew.xs.resize(ew.m() * hidden);
      for (int64_t j = 0; j < ew.m(); ++j)
        std::copy_n(x + ew.routed[j].first * hidden, hidden, ew.xs.data() + j * hidden);
      ew.x = ew.xs.data();
    }
    ew.ys.resize(ew.m() * hidden);
    ew.y = ew.ys.data();
  }
  std::vector<kernels::cpu::MatmulTask> jobs;
  for (ExpertWork& ew : work) {
    const int64_t inter = ew.weights->gate_proj.rows();
    ew.gate.resize(ew.m() * inter);
    ew.up.resize(ew.m() * inter);
    jobs.push_back({&ew.weights->gate_proj, ew.x, ew.m(), ew.gate.data()});
    jobs.push_back({&ew.weights->up_proj, ew.x, ew.m(), ew.up.data()});
  }
  RETURN_IF_ERROR(be.MatmulBatch(jobs));
  jobs.clear();
  for (ExpertWork& ew : work) {
    be.SiluMul(ew.gate.data(), ew.up.data(), static_cast<int64_t>(ew.gate.size()));
    jobs.push_back({&ew.weights->down_proj, ew.gate.data(), ew.m(), ew.y});
  }
  RETURN_IF_ERROR(be.MatmulBatch(jobs));
  // Summed in the order of the serial version: shared expert (already in y), then routed experts
  // by index.
  for (size_t i = shared ? 1 : 0; i < work.size(); ++i) {
    const ExpertWork& ew = work[i];
    for (size_t j = 0; j < ew.routed.size(); ++j)
      be.AddScaled(ew.routed[j].second, ew.ys.data() + j * hidden, y + ew.routed[j].first * hidden, hidden);
  }
  return Status::Ok();
}

}  // namespace tandem::engine::model
