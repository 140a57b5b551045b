#pragma once
// Which experts a token goes to and with what weight, as llama.cpp's MoE graph decides it:
//   s = softmax(l) or sigmoid(l)          l: the router's logits for the token
//   E = top-k of s + b                    b: exp_probs_b, a bias that only selects
//       (group-limited: first keep the n_group_used groups whose two best s + b sum highest)
//   w_e = s_e  (/ Σ_E s when normalised) (· scale)
#include <cstdint>
#include <vector>

#include "model/hparams.h"

namespace orchard {

struct RouterConfig {
  int64_t n_expert = 0, n_used = 0;
  ExpertGating gating = ExpertGating::Softmax;
  bool normalise = false;
  float scale = 1.0f;
  int64_t n_groups = 0, n_groups_used = 0;  // n_groups ≤ 1: no group limit

  static RouterConfig of(const HParams& hp);
};

// Routes one token: `logits` holds its n_expert router logits, `bias` the selection bias or
// nullptr. Writes n_used expert ids, best selection score first, and their weights. `scratch`
// is reused between calls.
void route_token(const RouterConfig& c, const float* logits, const float* bias, int32_t* experts, float* weights,
                 std::vector<float>& scratch);

}  // namespace orchard
