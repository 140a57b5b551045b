#pragma once
// NEON tiles for the integer formats: Q4_0, Q5_0 (Q4_K_M's fallback for rows not a multiple of
// 256) and Q8_0 against Q8_0 activations; the K-quants Q4_K, Q5_K, Q6_K against Q8_K (256 int8
// with per-16 sums). Same shapes and tiling as the x86
// tiles (x86_int8_tiles.h): weights unpacked once per block, then dotted with every token of the
// tile. Levels are unsigned (0..63) and fit int8, so SDOT (or its widening fallback) takes them
// as they are; offsets and minimums come out through the activations' sums.
//
// Compiled three times, chosen at run time (platform::arm_features): neon_quant_tiles.cpp for the
// build's target, neon_quant_tiles_dotprod.cpp for SDOT, neon_quant_tiles_i8mm.cpp for SDOT and
// SMMLA. Everything here therefore lives in an unnamed namespace, so the copies never meet at
// link time.
#if defined(__aarch64__)
#include <arm_neon.h>

#include <cmath>
#include <cstring>

#include "tensor/kernels/gemm_tiles.h"
#include "tensor/kernels/kernels.h"
#include "tensor/kernels/neon_int8.h"
#include "tensor/quant_blocks.h"

namespace orchard::kernels {
namespace {

using detail::BlockQ4_0;
using detail::BlockQ4_K;
using detail::BlockQ5_0;
using detail::BlockQ5_K;
using detail::BlockQ6_K;
using detail::BlockQ8_0;
using detail::BlockQ8_K;
using neon::dot16;
using neon::f16;

// Q5_0: element i's fifth bit is bit i of qh; spread each qh byte over eight lanes and test
// each lane's own bit.
inline int8x16_t fifth_bits(uint32_t qh, int half) {
  static constexpr uint8_t kBits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t spread = vcombine_u8(vdup_n_u8(static_cast<uint8_t>(qh >> (16 * half))),
                                        vdup_n_u8(static_cast<uint8_t>(qh >> (16 * half + 8))));
  return vreinterpretq_s8_u8(vandq_u8(vtstq_u8(spread, vld1q_u8(kBits)), vdupq_n_u8(0x10)));
}

// Q4_0 and Q5_0 weights as signed levels (q − offset), elements 0-15 and 16-31.
struct Q4_0Levels {
  using Block = BlockQ4_0;
  static void unpack(const BlockQ4_0* wb, int8x16_t& lo, int8x16_t& hi) {
    const uint8x16_t q = vld1q_u8(wb->qs);
    lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0F))), vdupq_n_s8(8));
    hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), vdupq_n_s8(8));
  }
};
struct Q5_0Levels {
  using Block = BlockQ5_0;
  static void unpack(const BlockQ5_0* wb, int8x16_t& lo, int8x16_t& hi) {
    uint32_t qh;
    std::memcpy(&qh, wb->qh, sizeof qh);
    const uint8x16_t q = vld1q_u8(wb->qs);
    lo = vsubq_s8(vorrq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0F))), fifth_bits(qh, 0)), vdupq_n_s8(16));
    hi = vsubq_s8(vorrq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), fifth_bits(qh, 1)), vdupq_n_s8(16));
  }
};
struct Q8_0Levels {
  using Block = BlockQ8_0;
  static void unpack(const BlockQ8_0* wb, int8x16_t& lo, int8x16_t& hi) {
    lo = vld1q_s8(wb->qs);
    hi = vld1q_s8(wb->qs + 16);
  }
};

// The 32-element formats against Q8_0 activations: one scale per block on each side. Each
// block's integer sum is exact and enters its (row, token) sum through one fused multiply-add,
// so the SMMLA tile below gives every token the same bits as this one, whatever the batch.
template <class Levels, int RB, int TB>
struct Block32Tile {
  static void run(const uint8_t* w, size_t wrb, const uint8_t* x, size_t xrb, int64_t nb, float* y,
                  int64_t ldy) {
    float acc[RB][TB] = {};
    for (int64_t b = 0; b < nb; ++b) {
      int8x16_t x0[TB], x1[TB];
      float dx[TB];
      for (int t = 0; t < TB; ++t) {
        const auto* xb = reinterpret_cast<const BlockQ8_0*>(x + t * xrb) + b;
        x0[t] = vld1q_s8(xb->qs);
        x1[t] = vld1q_s8(xb->qs + 16);
        dx[t] = f16(xb->d);
      }
      for (int r = 0; r < RB; ++r) {
        const auto* wb = reinterpret_cast<const typename Levels::Block*>(w + r * wrb) + b;
        int8x16_t lo, hi;
        Levels::unpack(wb, lo, hi);
        const float dw = f16(wb->d);
        for (int t = 0; t < TB; ++t) {
          const int32_t s = vaddvq_s32(dot16(dot16(vdupq_n_s32(0), lo, x0[t]), hi, x1[t]));
          acc[r][t] = std::fma(static_cast<float>(s), dw * dx[t], acc[r][t]);
        }
      }
    }
    for (int r = 0; r < RB; ++r)
      for (int t = 0; t < TB; ++t) y[t * ldy + r] = acc[r][t];
  }
};

#if defined(ORCHARD_NEON_I8MM)
// Two rows' (or tokens') 8-element runs side by side, SMMLA's operand layout.
inline int8x16_t pair_lo(int8x16_t a, int8x16_t b) {
  return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}
inline int8x16_t pair_hi(int8x16_t a, int8x16_t b) {
  return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}

// Prompts on Armv8.6's int8 matrix multiply (SMMLA: Apple M2 and later): 4 rows × 4 tokens as
// 2 × 2 blocks of 2 × 2, each SMMLA summing 8 elements of two rows against two tokens. Other
// tile shapes are Block32Tile's; both round alike (see there).
template <class Levels, int RB, int TB>
struct Block32MmlaTile {
  static void run(const uint8_t* w, size_t wrb, const uint8_t* x, size_t xrb, int64_t nb, float* y,
                  int64_t ldy) {
    if constexpr (RB != 4 || TB != 4) {
      Block32Tile<Levels, RB, TB>::run(w, wrb, x, xrb, nb, y, ldy);
    } else {
      // acc[q][p]: rows 2q, 2q+1 against tokens 2p, 2p+1, lanes (r0 t0, r0 t1, r1 t0, r1 t1).
      float32x4_t acc[2][2];
      for (auto& row : acc)
        for (auto& a : row) a = vdupq_n_f32(0);
      for (int64_t b = 0; b < nb; ++b) {
        int8x16_t xs[2][4];
        float dx[4];
        for (int p = 0; p < 2; ++p) {
          const auto* xa = reinterpret_cast<const BlockQ8_0*>(x + (2 * p) * xrb) + b;
          const auto* xc = reinterpret_cast<const BlockQ8_0*>(x + (2 * p + 1) * xrb) + b;
          const int8x16_t a0 = vld1q_s8(xa->qs), a1 = vld1q_s8(xa->qs + 16);
          const int8x16_t c0 = vld1q_s8(xc->qs), c1 = vld1q_s8(xc->qs + 16);
          xs[p][0] = pair_lo(a0, c0);
          xs[p][1] = pair_hi(a0, c0);
          xs[p][2] = pair_lo(a1, c1);
          xs[p][3] = pair_hi(a1, c1);
          dx[2 * p] = f16(xa->d);
          dx[2 * p + 1] = f16(xc->d);
        }
        for (int q = 0; q < 2; ++q) {
          const auto* wa = reinterpret_cast<const typename Levels::Block*>(w + (2 * q) * wrb) + b;
          const auto* wc = reinterpret_cast<const typename Levels::Block*>(w + (2 * q + 1) * wrb) + b;
          int8x16_t alo, ahi, clo, chi;
          Levels::unpack(wa, alo, ahi);
          Levels::unpack(wc, clo, chi);
          const int8x16_t ws[4] = {pair_lo(alo, clo), pair_hi(alo, clo), pair_lo(ahi, chi), pair_hi(ahi, chi)};
          const float da = f16(wa->d), dc = f16(wc->d);
          for (int p = 0; p < 2; ++p) {
            int32x4_t s = vdupq_n_s32(0);
            for (int k = 0; k < 4; ++k) s = vmmlaq_s32(s, ws[k], xs[p][k]);
            const float scale[4] = {da * dx[2 * p], da * dx[2 * p + 1], dc * dx[2 * p], dc * dx[2 * p + 1]};
            acc[q][p] = vfmaq_f32(acc[q][p], vcvtq_f32_s32(s), vld1q_f32(scale));
          }
        }
      }
      for (int q = 0; q < 2; ++q)
        for (int p = 0; p < 2; ++p) {
          y[(2 * p) * ldy + 2 * q] = vgetq_lane_f32(acc[q][p], 0);
          y[(2 * p + 1) * ldy + 2 * q] = vgetq_lane_f32(acc[q][p], 1);
          y[(2 * p) * ldy + 2 * q + 1] = vgetq_lane_f32(acc[q][p], 2);
          y[(2 * p + 1) * ldy + 2 * q + 1] = vgetq_lane_f32(acc[q][p], 3);
        }
    }
  }
};
template <int RB, int TB> using Q4_0Tile = Block32MmlaTile<Q4_0Levels, RB, TB>;
template <int RB, int TB> using Q5_0Tile = Block32MmlaTile<Q5_0Levels, RB, TB>;
template <int RB, int TB> using Q8_0Tile = Block32MmlaTile<Q8_0Levels, RB, TB>;
#else
template <int RB, int TB> using Q4_0Tile = Block32Tile<Q4_0Levels, RB, TB>;
template <int RB, int TB> using Q5_0Tile = Block32Tile<Q5_0Levels, RB, TB>;
template <int RB, int TB> using Q8_0Tile = Block32Tile<Q8_0Levels, RB, TB>;
#endif

// q[2k], q[2k+1]: sub-block k's 32 levels as two halves of 16.
struct Q4_KLevels {
  using Block = BlockQ4_K;
  static void unpack(const BlockQ4_K* wb, int8x16_t q[16]) {
    const uint8x16_t low4 = vdupq_n_u8(0x0F);
    for (int j = 0; j < 4; ++j)
      for (int h = 0; h < 2; ++h) {
        const uint8x16_t bytes = vld1q_u8(wb->qs + 32 * j + 16 * h);
        q[4 * j + h] = vreinterpretq_s8_u8(vandq_u8(bytes, low4));
        q[4 * j + 2 + h] = vreinterpretq_s8_u8(vshrq_n_u8(bytes, 4));
      }
  }
};
// Q5_K: bit 2j of qh[l] is the fifth bit of sub-block 2j's element l, bit 2j+1 of 2j+1's.
struct Q5_KLevels {
  using Block = BlockQ5_K;
  static void unpack(const BlockQ5_K* wb, int8x16_t q[16]) {
    const uint8x16_t low4 = vdupq_n_u8(0x0F), one = vdupq_n_u8(1);
    const uint8x16_t qh[2] = {vld1q_u8(wb->qh), vld1q_u8(wb->qh + 16)};
    for (int j = 0; j < 4; ++j)
      for (int h = 0; h < 2; ++h) {
        const uint8x16_t bytes = vld1q_u8(wb->qs + 32 * j + 16 * h);
        const uint8x16_t b0 = vshlq_n_u8(vandq_u8(vshlq_u8(qh[h], vdupq_n_s8(static_cast<int8_t>(-2 * j))), one), 4);
        const uint8x16_t b1 =
            vshlq_n_u8(vandq_u8(vshlq_u8(qh[h], vdupq_n_s8(static_cast<int8_t>(-2 * j - 1))), one), 4);
        q[4 * j + h] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(bytes, low4), b0));
        q[4 * j + 2 + h] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(bytes, 4), b1));
      }
  }
};

// Σ_k sc_k·Σ q·x − Σ_k m_k·Σ x, with d and dmin scaling the two: ggml's Q4_K/Q5_K dot.
template <class Levels, int RB, int TB>
struct K4Tile {
  static void run(const uint8_t* w, size_t wrb, const uint8_t* x, size_t xrb, int64_t nb, float* y,
                  int64_t ldy) {
    float32x4_t acc[RB][TB];
    float mins[RB][TB] = {};
    for (int r = 0; r < RB; ++r)
      for (int t = 0; t < TB; ++t) acc[r][t] = vdupq_n_f32(0);
    for (int64_t b = 0; b < nb; ++b) {
      for (int r = 0; r < RB; ++r) {
        const auto* wb = reinterpret_cast<const typename Levels::Block*>(w + r * wrb) + b;
        int8x16_t q[16];
        Levels::unpack(wb, q);
        int sc[8], m[8];
        for (int j = 0; j < 8; ++j) detail::scale_min_k4(j, wb->scales, sc[j], m[j]);
        const float d = f16(wb->d), dmin = f16(wb->dmin);
        for (int t = 0; t < TB; ++t) {
          const auto* xb = reinterpret_cast<const BlockQ8_K*>(x + t * xrb) + b;
          int32x4_t isum = vdupq_n_s32(0);
          int msum = 0;
          for (int j = 0; j < 8; ++j) {
            const int32x4_t s = dot16(dot16(vdupq_n_s32(0), q[2 * j], vld1q_s8(xb->qs + 32 * j)), q[2 * j + 1],
                                      vld1q_s8(xb->qs + 32 * j + 16));
            isum = vmlaq_n_s32(isum, s, sc[j]);
            msum += m[j] * (xb->bsums[2 * j] + xb->bsums[2 * j + 1]);
          }
          acc[r][t] = vmlaq_n_f32(acc[r][t], vcvtq_f32_s32(isum), d * xb->d);
          mins[r][t] += dmin * xb->d * static_cast<float>(msum);
        }
      }
    }
    for (int r = 0; r < RB; ++r)
      for (int t = 0; t < TB; ++t) y[t * ldy + r] = vaddvq_f32(acc[r][t]) - mins[r][t];
  }
};
template <int RB, int TB> using Q4_KTile = K4Tile<Q4_KLevels, RB, TB>;
template <int RB, int TB> using Q5_KTile = K4Tile<Q5_KLevels, RB, TB>;

// Q6_K: per half n of 128 elements, ql[64n + l] / ql[64n + 32 + l] hold the low nibbles of
// elements l, 32+l (low) and 64+l, 96+l (high); qh[32n + l] their 2-bit high parts in that
// order. Levels carry a bias of 32 and a signed scale per 16 elements.
template <int RB, int TB>
struct Q6_KTile {
  static void run(const uint8_t* w, size_t wrb, const uint8_t* x, size_t xrb, int64_t nb, float* y,
                  int64_t ldy) {
    float acc[RB][TB] = {};
    const uint8x16_t low4 = vdupq_n_u8(0x0F), three = vdupq_n_u8(3);
    for (int64_t b = 0; b < nb; ++b) {
      for (int r = 0; r < RB; ++r) {
        const auto* wb = reinterpret_cast<const BlockQ6_K*>(w + r * wrb) + b;
        // q[i]: elements 16i … 16i+15, unsigned 6-bit levels.
        int8x16_t q[16];
        for (int n = 0; n < 2; ++n)
          for (int h = 0; h < 2; ++h) {
            const uint8x16_t l0 = vld1q_u8(wb->ql + 64 * n + 16 * h), l1 = vld1q_u8(wb->ql + 64 * n + 32 + 16 * h);
            const uint8x16_t hb = vld1q_u8(wb->qh + 32 * n + 16 * h);
            const uint8x16_t h0 = vshlq_n_u8(vandq_u8(hb, three), 4);
            const uint8x16_t h1 = vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), three), 4);
            const uint8x16_t h2 = vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), three), 4);
            const uint8x16_t h3 = vshlq_n_u8(vshrq_n_u8(hb, 6), 4);
            q[8 * n + 0 + h] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(l0, low4), h0));
            q[8 * n + 2 + h] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(l1, low4), h1));
            q[8 * n + 4 + h] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(l0, 4), h2));
            q[8 * n + 6 + h] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(l1, 4), h3));
          }
        const float d = f16(wb->d);
        for (int t = 0; t < TB; ++t) {
          const auto* xb = reinterpret_cast<const BlockQ8_K*>(x + t * xrb) + b;
          int32x4_t isum = vdupq_n_s32(0);
          int corr = 0;
          for (int i = 0; i < 16; ++i) {
            isum = vmlaq_n_s32(isum, dot16(vdupq_n_s32(0), q[i], vld1q_s8(xb->qs + 16 * i)), wb->scales[i]);
            corr += wb->scales[i] * xb->bsums[i];
          }
          acc[r][t] += d * xb->d * static_cast<float>(vaddvq_s32(isum) - 32 * corr);
        }
      }
    }
    for (int r = 0; r < RB; ++r)
      for (int t = 0; t < TB; ++t) y[t * ldy + r] = acc[r][t];
  }
};

inline GemmFn quant_gemm(DType w) {
  switch (w) {
    case DType::Q4_0: return gemm_tiled<Q4_0Tile>;
    case DType::Q5_0: return gemm_tiled<Q5_0Tile>;
    case DType::Q8_0: return gemm_tiled<Q8_0Tile>;
    case DType::Q4_K: return gemm_tiled<Q4_KTile>;
    case DType::Q5_K: return gemm_tiled<Q5_KTile>;
    case DType::Q6_K: return gemm_tiled<Q6_KTile>;
    default: return nullptr;
  }
}

}  // namespace
}  // namespace orchard::kernels
#endif  // __aarch64__
