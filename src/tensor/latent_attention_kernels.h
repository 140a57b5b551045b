#pragma once
// Latent attention (deepseek2's multi-head latent attention) for one token: every head reads
// the same cache of latents, kept as key panels (attention.h's layout, kd = the latent's
// `lora` values and the shared RoPE key), so a token's heads are attended together.
//   scores[h][p] = query_h · key_p                 (latent_scores, before scaling and softmax)
//   lat_h[d] = Σ_p weights[h][p] · key_p[d], d < lora   (latent_mix: the latent is the key's start)
// Each lane's sums run in dimension and position order, and each row of 32 lanes is added as
// latent_lane_sum's tree, on every ISA: a head's bits depend neither on the CPU nor on the
// heads beside it.
#include <cstdint>

namespace orchard {

struct LatentScoresArgs {
  const float* const* query;  // heads rows of kd floats
  int heads = 0;
  const float* panels = nullptr;
  int64_t kd = 0, len = 0;
  float* const* scores;  // heads rows, each written up to len rounded up to whole panels
};
void latent_scores(const LatentScoresArgs& a);
void latent_scores_reference(const LatentScoresArgs& a);  // scalar, the same bits

struct LatentMixArgs {
  const float* const* weights;  // heads rows of len values, zero from len to the panel's end
  int heads = 0;
  const float* panels = nullptr;
  int64_t kd = 0, lora = 0, len = 0;
  float* const* lat;  // heads rows of lora floats
};
void latent_mix(const LatentMixArgs& a);
void latent_mix_reference(const LatentMixArgs& a);  // scalar, the same bits

// The 32 lanes of a row added as a fixed tree (vectorises; added one after another they were
// thousands of dependent adds per head and token).
inline float latent_lane_sum(const float* __restrict lanes) {
  float s8[8];
  for (int j = 0; j < 8; ++j) s8[j] = (lanes[j] + lanes[j + 8]) + (lanes[j + 16] + lanes[j + 24]);
  return ((s8[0] + s8[4]) + (s8[2] + s8[6])) + ((s8[1] + s8[5]) + (s8[3] + s8[7]));
}

}  // namespace orchard
