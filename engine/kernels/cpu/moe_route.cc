#include "engine/kernels/cpu/moe_route.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace tandem::engine::kernels::cpu {
namespace {

// Indices of the `k` largest values, largest first, ties to the lower index.
// (A partial sort under the total order (value descending, index ascending): the first k of a
// stable sort by value, without sorting all n — at decode n = 384 experts for k = 8.)
std::vector<int32_t> TopK(const std::vector<double>& v, int64_t k) {
  std::vector<int32_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  const auto kth = idx.begin() + std::min<int64_t>(k, static_cast<int64_t>(idx.size()));
  std::partial_sort(idx.begin(), kth, idx.end(),
                    [&](int32_t a, int32_t b) { return v[a] > v[b] || (!(v[b] > v[a]) && a < b); });
  idx.erase(kth, idx.end());
  return idx;
}

void RouteOne(const MoeRouting& r, const float* logits, const float* bias, int32_t* experts_out,
              float* gates_out) {
  const int64_t n = r.experts;
  std::vector<double> scores(n);
  if (r.sigmoid) {
    for (int64_t e = 0; e < n; ++e) scores[e] = 1.0 / (1.0 + std::exp(-static_cast<double>(logits[e])));
  } else {
    const double m = *std::max_element(logits, logits + n);
    double sum = 0;
    for (int64_t e = 0; e < n; ++e) sum += scores[e] = std::exp(logits[e] - m);
    for (double& s : scores) s /= sum;
  }
  std::vector<double> choice = scores;
  if (bias != nullptr) {
    for (int64_t e = 0; e < n; ++e) choice[e] += bias[e];
  }
  if (r.group_score != MoeRouting::Groups::kNone && r.groups > 1) {
    const int64_t per_group = n / r.groups;
    std::vector<double> group_score(r.groups);
    for (int64_t g = 0; g < r.groups; ++g) {
      std::vector<double> members(choice.begin() + g * per_group, choice.begin() + (g + 1) * per_group);
      std::sort(members.rbegin(), members.rend());
      const bool sum_two = r.group_score == MoeRouting::Groups::kSumOfTwoBest && per_group >= 2;
      group_score[g] = sum_two ? members[0] + members[1] : members[0];
    }
    std::vector<bool> keep(r.groups, false);
    for (int32_t g : TopK(group_score, r.top_groups)) keep[g] = true;
    for (int64_t e = 0; e < n; ++e) {
      if (!keep[e / per_group]) choice[e] = -std::numeric_limits<double>::infinity();
    }
  }
  const std::vector<int32_t> chosen = TopK(choice, r.top_k);
  double sum = 0;
  for (int32_t e : chosen) sum += scores[e];
  const double norm = r.norm_top_k ? 1.0 / (sum + 1e-20) : 1.0;
  for (size_t k = 0; k < chosen.size(); ++k) {
    experts_out[k] = chosen[k];
    gates_out[k] = static_cast<float>(scores[chosen[k]] * norm * r.scaling);
  }
}

}  // namespace

void MoeRoute(const MoeRouting& r, const float* logits, int64_t tokens, const float* bias,
              int32_t* experts_out, float* gates_out) {
  for (int64_t t = 0; t < tokens; ++t)
    RouteOne(r, logits + t * r.experts, bias, experts_out + t * r.top_k, gates_out + t * r.top_k);
}

}  // namespace tandem::engine::kernels::cpu
