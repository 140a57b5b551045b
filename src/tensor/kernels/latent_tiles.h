#pragma once
// Latent attention's two passes over a latent cache (tensor/latent_attention_kernels.h), written
// once over a vector type of 4, 8 or 16 floats (AVX-512: avx512_levels.cpp, AVX2:
// avx2_attention.cpp, NEON: neon_attention.cpp). A few heads go side by side: each row of a key
// panel is loaded once for all of them, and their sums are independent chains held in
// registers (one head at a time in plain loops, the compiler kept the 32-lane sums in memory
// and each row waited on the previous one's store).
//
// Include after the ISA's target switch. V supplies Reg, kWidth (dividing 32), zero(),
// splat(x), load(const float*), store(float*, r) and fma(a, b, acc) = a·b + acc.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "tensor/attention.h"
#include "tensor/latent_attention_kernels.h"

namespace orchard::kernels::latent_tiles {

// scores[h][p] = Σ_d query_h[d] · key_p[d] for the HB heads from h0, panel by panel.
template <class V, int HB>
void scores_heads(const LatentScoresArgs& a, int h0) {
  using Reg = typename V::Reg;
  constexpr int R = kKeyPanel / V::kWidth;
  const int64_t panels = (a.len + kKeyPanel - 1) / kKeyPanel;
  for (int64_t pn = 0; pn < panels; ++pn) {
    const float* panel = a.panels + pn * a.kd * kKeyPanel;
    Reg acc[HB][R];
#pragma GCC unroll 16
    for (int h = 0; h < HB; ++h)
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[h][r] = V::zero();
    for (int64_t d = 0; d < a.kd; ++d) {
      Reg row[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) row[r] = V::load(panel + d * kKeyPanel + r * V::kWidth);
#pragma GCC unroll 16
      for (int h = 0; h < HB; ++h) {
        const Reg q = V::splat(a.query[h0 + h][d]);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) acc[h][r] = V::fma(q, row[r], acc[h][r]);
      }
    }
#pragma GCC unroll 16
    for (int h = 0; h < HB; ++h)
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) V::store(a.scores[h0 + h] + pn * kKeyPanel + r * V::kWidth, acc[h][r]);
  }
}

// lanes[h][d][j] = Σ_panels weights_h[pn·32 + j] · panel_pn[d][j], then lat_h[d] = the tree sum
// of lanes[h][d] (latent_lane_sum).
template <class V, int HB>
void mix_heads(const LatentMixArgs& a, int h0, float* lanes) {
  using Reg = typename V::Reg;
  constexpr int R = kKeyPanel / V::kWidth;
  const int64_t panels = (a.len + kKeyPanel - 1) / kKeyPanel;
  for (int64_t d = 0; d < a.lora; ++d) {
    Reg acc[HB][R];
#pragma GCC unroll 16
    for (int h = 0; h < HB; ++h)
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[h][r] = V::zero();
    for (int64_t pn = 0; pn < panels; ++pn) {
      const float* row = a.panels + pn * a.kd * kKeyPanel + d * kKeyPanel;
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const Reg x = V::load(row + r * V::kWidth);
#pragma GCC unroll 16
        for (int h = 0; h < HB; ++h)
          acc[h][r] = V::fma(V::load(a.weights[h0 + h] + pn * kKeyPanel + r * V::kWidth), x, acc[h][r]);
      }
    }
#pragma GCC unroll 16
    for (int h = 0; h < HB; ++h) {
      float* l = lanes + (h * a.lora + d) * kKeyPanel;
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) V::store(l + r * V::kWidth, acc[h][r]);
    }
  }
#pragma GCC unroll 16
  for (int h = 0; h < HB; ++h)
    for (int64_t d = 0; d < a.lora; ++d) a.lat[h0 + h][d] = latent_lane_sum(lanes + (h * a.lora + d) * kKeyPanel);
}

// Heads in groups of up to HB (the ISA's registers decide HB); a head's sums are the same
// whichever group it is in.
template <class V, int HB>
void scores(const LatentScoresArgs& a) {
  int h = 0;
  for (; h + HB <= a.heads; h += HB) scores_heads<V, HB>(a, h);
  for (; h < a.heads; ++h) scores_heads<V, 1>(a, h);
}

template <class V, int HB>
void mix(const LatentMixArgs& a) {
  thread_local std::vector<float> lanes;
  if (lanes.size() < static_cast<size_t>(HB * a.lora * kKeyPanel)) lanes.resize(static_cast<size_t>(HB * a.lora * kKeyPanel));
  int h = 0;
  for (; h + HB <= a.heads; h += HB) mix_heads<V, HB>(a, h, lanes.data());
  for (; h < a.heads; ++h) mix_heads<V, 1>(a, h, lanes.data());
}

}  // namespace orchard::kernels::latent_tiles
