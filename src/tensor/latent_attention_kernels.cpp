#include "tensor/latent_attention_kernels.h"

#include <cmath>
#include <vector>

#include "tensor/attention.h"
#include "tensor/kernels/kernels.h"

namespace orchard {
namespace {

const kernels::LatentFns* simd() {
  static const kernels::LatentFns* fns = kernels::lookup_latent(kernels::detect_isa());
  return fns;
}

}  // namespace

// The scalar reference: the kernels' operations lane by lane (one fused multiply-add each).
void latent_scores_reference(const LatentScoresArgs& a) {
  for (int h = 0; h < a.heads; ++h)
    for (int64_t p0 = 0; p0 < a.len; p0 += kKeyPanel) {
      const float* panel = a.panels + p0 / kKeyPanel * a.kd * kKeyPanel;
      for (int64_t j = 0; j < kKeyPanel; ++j) {
        float acc = 0.0f;
        for (int64_t d = 0; d < a.kd; ++d) acc = std::fma(a.query[h][d], panel[d * kKeyPanel + j], acc);
        a.scores[h][p0 + j] = acc;
      }
    }
}

void latent_mix_reference(const LatentMixArgs& a) {
  const int64_t panels = (a.len + kKeyPanel - 1) / kKeyPanel;
  float lanes[kKeyPanel];
  for (int h = 0; h < a.heads; ++h)
    for (int64_t d = 0; d < a.lora; ++d) {
      for (int64_t j = 0; j < kKeyPanel; ++j) {
        float acc = 0.0f;
        for (int64_t pn = 0; pn < panels; ++pn)
          acc = std::fma(a.weights[h][pn * kKeyPanel + j], a.panels[(pn * a.kd + d) * kKeyPanel + j], acc);
        lanes[j] = acc;
      }
      a.lat[h][d] = latent_lane_sum(lanes);
    }
}

void latent_scores(const LatentScoresArgs& a) {
  if (const auto* f = simd()) f->scores(a);
  else latent_scores_reference(a);
}

void latent_mix(const LatentMixArgs& a) {
  if (const auto* f = simd()) f->mix(a);
  else latent_mix_reference(a);
}

}  // namespace orchard
