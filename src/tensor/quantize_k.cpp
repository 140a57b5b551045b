// Writing the K-quants Q4_K, Q5_K and Q6_K as llama-quantize does without an importance matrix
// (ggml's reference quantizers), so that files `make-model` writes hold the bytes llama.cpp would
// have written. Q4_K/Q5_K: each sub-block of 32 gets the scale and minimum that minimise the
// error weighted by (rms of the sub-block + |x|), searched over a ladder of trial scales; the
// eight scales and mins are then quantized to 6 bits against the block's largest. Q6_K: each
// sub-block of 16 gets a symmetric scale searched around the one that maps its largest |x| to
// -32, weighted by x²; the sixteen scales quantized to signed 8 bits.
//
// The trial with the lowest error is picked by comparisons that a single rounding can tip, and
// the point is to pick the one llama-quantize picks: its reference quantizers are built for the
// baseline ISA (ggml-base, no FMA), so every product and sum here is rounded on its own, in
// ggml's order (ggml_rounding.h).
#include "tensor/ggml_rounding.h"  // first: no contraction into FMAs below

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/f16.h"
#include "tensor/quant_blocks.h"

namespace orchard::detail {
namespace {

constexpr float kGroupMaxEps = 1e-15f;


// Scale and minimum for n values quantized to [0, nmax]: x ≈ scale·L + min, min ≤ 0. Starts from
// the range's own scale, then tries iscale = (nmax + rmin + rdelta·k) / range for k = 0..nstep,
// each with the least-squares scale and min for its levels, and keeps the lowest weighted error.
// Writes the levels to L and returns the scale; *neg_min receives -min.
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float* neg_min, float rmin,
                    float rdelta, int nstep) {
  float lo = x[0], hi = x[0], sum_w = w[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  lo = std::min(lo, 0.0f);
  if (hi == lo) {
    std::fill_n(L, n, uint8_t{0});
    *neg_min = -lo;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / (hi - lo);
  float scale = 1 / iscale, min = lo, best = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(std::clamp(nearest_int(iscale * (x[i] - lo)), 0, nmax));
    const float d = scale * static_cast<float>(L[i]) + lo - x[i];
    best += w[i] * (d * d);
  }
  uint8_t trial[32];
  for (int k = 0; k <= nstep; ++k) {
    // (Against the best minimum so far, not the range's: llama-quantize's trials do so.)
    iscale = (rmin + rdelta * static_cast<float>(k) + static_cast<float>(nmax)) / (hi - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
      trial[i] = static_cast<uint8_t>(l);
      const float wl = w[i] * static_cast<float>(l);
      sum_l += wl;
      sum_l2 += wl * static_cast<float>(l);
      sum_xl += wl * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0)) continue;
    float s = (sum_w * sum_xl - sum_x * sum_l) / det;
    float m = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (m > 0) {
      m = 0;
      s = sum_xl / sum_l2;
    }
    float err = 0;
    for (int i = 0; i < n; ++i) {
      const float d = s * static_cast<float>(trial[i]) + m - x[i];
      err += w[i] * (d * d);
    }
    if (err < best) {
      std::copy_n(trial, n, L);
      best = err;
      scale = s;
      min = m;
    }
  }
  *neg_min = -min;
  return scale;
}

// Symmetric scale for n values quantized to [-nmax, nmax-1] (Q6_K: weights x², 18 trial scales
// around -nmax/max). Writes L = level + nmax and returns the scale.
float fit_symmetric(int n, int nmax, const float* x, int8_t* L) {
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  if (amax < kGroupMaxEps) {
    std::fill_n(L, n, int8_t{0});
    return 0.0f;
  }
  auto sums = [&](float iscale, float& sum_lx, float& sum_l2) {
    sum_lx = sum_l2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      sum_lx += w * x[i] * static_cast<float>(l);
      sum_l2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
  };
  auto levels = [&](float iscale) {
    for (int i = 0; i < n; ++i)
      L[i] = static_cast<int8_t>(nmax + std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1));
  };
  float iscale = static_cast<float>(-nmax) / max, sum_lx, sum_l2;
  levels(iscale);
  sums(iscale, sum_lx, sum_l2);
  float scale = sum_l2 != 0 ? sum_lx / sum_l2 : 0.0f, best = scale * sum_lx;
  for (int k = -9; k <= 9; ++k) {
    if (k == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(k)) / max;
    sums(iscale, sum_lx, sum_l2);
    if (sum_l2 > 0 && sum_lx * sum_lx > best * sum_l2) {
      levels(iscale);
      scale = sum_lx / sum_l2;
      best = scale * sum_lx;
    }
  }
  return scale;
}

// The 6-bit scales and mins of a Q4_K/Q5_K block from the sub-blocks' fits, then each value's
// level against the stored (rounded) scale and min. `nmax` 15 or 31.
void quantize_k_super(const float* x, int nmax, float rmin, int nstep, uint16_t& d16, uint16_t& dmin16,
                      uint8_t* scales12, uint8_t* L) {
  float scales[8], mins[8], w[32], max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) w[l] = av + std::fabs(xs[l]);
    scales[j] = fit_scale_min(32, nmax, xs, w, L + 32 * j, &mins[j], rmin, 0.1f, nstep);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f, inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  std::memset(scales12, 0, 12);
  for (int j = 0; j < 8; ++j) {
    const auto ls = static_cast<uint8_t>(std::min(63, nearest_int(inv_scale * scales[j]) & 0xFF));
    const auto lm = static_cast<uint8_t>(std::min(63, nearest_int(inv_min * mins[j]) & 0xFF));
    if (j < 4) {
      scales12[j] = ls;
      scales12[j + 4] = lm;
    } else {
      scales12[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      scales12[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      scales12[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  d16 = fp32_to_fp16(max_scale / 63.f);
  dmin16 = fp32_to_fp16(max_min / 63.f);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    scale_min_k4(j, scales12, sc, m);
    const float d = fp16_to_fp32(d16) * static_cast<float>(sc);
    if (d == 0) continue;
    const float dm = fp16_to_fp32(dmin16) * static_cast<float>(m);
    for (int i = 0; i < 32; ++i)
      L[32 * j + i] = static_cast<uint8_t>(std::clamp(nearest_int((x[32 * j + i] + dm) / d), 0, nmax));
  }
}

}  // namespace

void quantize_q4_k(const float* x, void* dst, int64_t nb) {
  auto* b = static_cast<BlockQ4_K*>(dst);
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    quantize_k_super(x, 15, -1.0f, 20, b[i].d, b[i].dmin, b[i].scales, L);
    // 64 values per 32 bytes: the first 32 in the low nibbles, the next 32 in the high ones.
    for (int j = 0; j < kQK_K; j += 64)
      for (int l = 0; l < 32; ++l) b[i].qs[j / 2 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
  }
}

void quantize_q5_k(const float* x, void* dst, int64_t nb) {
  auto* b = static_cast<BlockQ5_K*>(dst);
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    quantize_k_super(x, 31, -0.5f, 15, b[i].d, b[i].dmin, b[i].scales, L);
    // Low nibbles as Q4_K; the fifth bit of value l + 64·k (l < 32) in bit 2k of qh[l], of
    // value l + 32 + 64·k in bit 2k + 1.
    std::memset(b[i].qh, 0, sizeof b[i].qh);
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 32; ++l) {
        const int lo = L[64 * k + l], hi = L[64 * k + l + 32];
        b[i].qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * k)) | ((hi >> 4) << (2 * k + 1)));
        b[i].qs[32 * k + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
      }
  }
}

void quantize_q6_k(const float* x, void* dst, int64_t nb) {
  auto* b = static_cast<BlockQ6_K*>(dst);
  int8_t L[kQK_K];
  float scales[16];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float max_scale = 0, max_abs = 0;
    for (int s = 0; s < 16; ++s) {
      scales[s] = fit_symmetric(16, 32, x + 16 * s, L + 16 * s);
      if (std::fabs(scales[s]) > max_abs) {
        max_abs = std::fabs(scales[s]);
        max_scale = scales[s];
      }
    }
    if (max_abs < kGroupMaxEps) {
      std::memset(&b[i], 0, sizeof b[i]);
      continue;
    }
    const float iscale = -128.f / max_scale;
    b[i].d = fp32_to_fp16(1 / iscale);
    for (int s = 0; s < 16; ++s) b[i].scales[s] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[s])));
    for (int s = 0; s < 16; ++s) {
      const float d = fp16_to_fp32(b[i].d) * static_cast<float>(b[i].scales[s]);
      if (d == 0) continue;
      for (int l = 0; l < 16; ++l)
        L[16 * s + l] = static_cast<int8_t>(32 + std::clamp(nearest_int(x[16 * s + l] / d), -32, 31));
    }
    // Per 128 values: low nibbles of l and l + 64 share ql[l], of l + 32 and l + 96 ql[l + 32];
    // the four 2-bit tops of l, l + 32, l + 64, l + 96 share qh[l].
    for (int h = 0; h < 2; ++h) {
      const int8_t* q = L + 128 * h;
      uint8_t* ql = b[i].ql + 64 * h;
      uint8_t* qh = b[i].qh + 32 * h;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((q[l] & 0xF) | ((q[l + 64] & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((q[l + 32] & 0xF) | ((q[l + 96] & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((q[l] >> 4) | ((q[l + 32] >> 4) << 2) | ((q[l + 64] >> 4) << 4) |
                                     ((q[l + 96] >> 4) << 6));
      }
    }
  }
}

}  // namespace orchard::detail
