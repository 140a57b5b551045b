#include "model/blocks/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "tensor/ops.h"

namespace orchard {

RouterConfig RouterConfig::of(const HParams& hp) {
  RouterConfig c;
  c.n_expert = hp.n_expert;
  c.n_used = hp.n_expert_used;
  c.gating = hp.gating;
  c.normalise = hp.expert_weights_norm;
  c.scale = hp.expert_weights_scale;
  c.n_groups = hp.n_expert_groups;
  c.n_groups_used = hp.n_group_used;
  return c;
}

void route_token(const RouterConfig& c, const float* logits, const float* bias, int32_t* experts, float* weights,
                 std::vector<float>& scratch) {
  const int64_t n = c.n_expert;
  scratch.resize(static_cast<size_t>(2 * n));
  float* s = scratch.data();          // scores: what the weights are made of
  float* select = s + n;              // what the choice is made on
  std::copy_n(logits, n, s);
  if (c.gating == ExpertGating::Softmax) softmax(s, n);
  else
    for (int64_t e = 0; e < n; ++e) s[e] = 1.0f / (1.0f + std::exp(-s[e]));
  for (int64_t e = 0; e < n; ++e) select[e] = bias ? s[e] + bias[e] : s[e];

  if (c.n_groups > 1 && c.n_groups_used < c.n_groups) {
    // A group's score is the sum of its two best selection scores; experts outside the
    // n_groups_used best groups cannot be chosen.
    const int64_t per = n / c.n_groups;
    std::vector<std::pair<float, int64_t>> groups;
    for (int64_t g = 0; g < c.n_groups; ++g) {
      float best = -std::numeric_limits<float>::infinity(), second = best;
      for (int64_t e = g * per; e < (g + 1) * per; ++e) {
        if (select[e] > best) second = best, best = select[e];
        else if (select[e] > second) second = select[e];
      }
      groups.emplace_back(per > 1 ? best + second : best, g);
    }
    std::stable_sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (size_t i = static_cast<size_t>(c.n_groups_used); i < groups.size(); ++i)
      std::fill_n(select + groups[i].second * per, per, -std::numeric_limits<float>::infinity());
  }

  // Top-k by selection score, ties to the lower id.
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + c.n_used, order.end(), [&](int32_t a, int32_t b) {
    return select[a] > select[b] || (select[a] == select[b] && a < b);
  });
  float sum = 0;
  for (int64_t k = 0; k < c.n_used; ++k) {
    experts[k] = order[static_cast<size_t>(k)];
    weights[k] = s[experts[k]];
    sum += weights[k];
  }
  for (int64_t k = 0; k < c.n_used; ++k) {
    if (c.normalise) weights[k] /= sum;
    weights[k] *= c.scale;
  }
}

}  // namespace orchard
