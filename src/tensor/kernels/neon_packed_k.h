#pragma once
// Q4_K and Q6_K × one or many tokens on NEON over weights repacked at load, 4 rows in the 4 int32
// lanes as neon_packed_rows.h does for Q4_0 (see there for the plan and for why it is compiled
// twice), per super-block of 256: SDOT's by-element form advances 4 rows by 4 elements, sub-block
// scales are 4-lane vectors, and each row's super-block ends as one exact integer and one fused
// multiply-add (two for Q4_K: the mins apart), with no horizontal sums. Activations are Q8_K
// blocks exactly as quantize_activations writes them (d, q[256], bsums[16]).
//
// Q4_K, per group of 4 rows and super-block (592 bytes for 4 original blocks of 144, +2.8 %:
// the 6-bit scales and mins unpacked once, at load):
//   uint16 d[4], dmin[4]    the rows' scales
//   uint8  sc[8][4], m[8][4] sub-block j, row i
//   uint8  q[4][8][4][4]    pair p, chunk k, row i: bytes qs[32p + 4k .. +3] of row i (low
//                           nibbles: sub-block 2p, elements 4k..4k+3; high: sub-block 2p+1)
//   W·x = d·dx·Σ_j sc_j·(q_j·x_j) − dmin·dx·Σ_j m_j·Σx_j
//
// Q6_K, per group (840 bytes, exactly the 4 original blocks): element 128n + 32c + l of a row
// (l < 32) is ql[64n + 32(c%2) + l]'s low (c < 2) or high nibble with bits 2c, 2c+1 of
// qh[32n + l] on top, less 32, scaled by scales[8n + 2c + l/16]:
//   uint16 d[4]
//   int8   sc[16][4]        scale s, row i
//   uint8  ql[2][2][8][4][4] half n, part a (ql[64n + 4k..]) or b (ql[64n + 32 + 4k..]), chunk
//                           k, row i
//   uint8  qh[2][8][4][4]   half n, chunk k, row i: qh[32n + 4k .. +3]
//   W·x = d·dx·(Σ_s sc_s·(q_s·x_s) − 32·Σ_s sc_s·Σx_s)
#if defined(__aarch64__)
#include "tensor/kernels/neon_packed_rows.h"
#include "tensor/quant.h"

namespace orchard::kernels {
namespace {

using detail::BlockQ4_K;
using detail::BlockQ6_K;
using detail::BlockQ8_K;

// The 4 bytes at p (one per row) widened to int32 lanes.
inline int32x4_t widen4_u8(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(vmovl_u8(vcreate_u8(v)))));
}
inline int32x4_t widen4_s8(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return vmovl_s16(vget_low_s16(vmovl_s8(vcreate_s8(v))));
}
inline float32x4_t halves4(const uint8_t* p) {
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p))));
}

struct Q4_KFormat {
  static constexpr int64_t kGroup = 4, kElems = 256;
  static constexpr size_t kSc = 16, kM = 48, kQ = 80, kBlock = kQ + 512, kXBytes = sizeof(BlockQ8_K);
  static constexpr int64_t kSlab = int64_t{1} << 40;  // a whole row is one slab
  static constexpr int64_t kMaxTile = 2;               // 2 tokens' activations and sums fill the registers
  static void pack_block(const uint8_t* w, size_t wrb, int64_t b, uint8_t* dst) {
    for (int64_t i = 0; i < kGroup; ++i) {
      const auto* blk = reinterpret_cast<const BlockQ4_K*>(w + i * wrb) + b;
      std::memcpy(dst + 2 * i, &blk->d, 2);
      std::memcpy(dst + 8 + 2 * i, &blk->dmin, 2);
      for (int j = 0; j < 8; ++j) {
        int sc, m;
        detail::scale_min_k4(j, blk->scales, sc, m);
        dst[kSc + 4 * j + i] = static_cast<uint8_t>(sc);
        dst[kM + 4 * j + i] = static_cast<uint8_t>(m);
      }
      for (int p = 0; p < 4; ++p)
        for (int k = 0; k < 8; ++k) std::memcpy(dst + kQ + 128 * p + 16 * k + 4 * i, blk->qs + 32 * p + 4 * k, 4);
    }
  }
  // Chunks L.. of a pair's half: low nibbles against xl (sub-block 2p), high against xh (2p+1).
  template <int TB, int L = 0>
  [[gnu::always_inline]] static void nibbles(const uint8_t* q, const int8x16_t* xl, const int8x16_t* xh,
                                             int32x4_t* sl, int32x4_t* sh) {
    if constexpr (L < 4) {
      const uint8x16_t v = vld1q_u8(q + 16 * L);
      const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F)));
      const int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
#pragma GCC unroll 4
      for (int t = 0; t < TB; ++t) {
        sl[t] = dot_lane<L>(sl[t], lo, xl[t]);
        sh[t] = dot_lane<L>(sh[t], hi, xh[t]);
      }
      nibbles<TB, L + 1>(q, xl, xh, sl, sh);
    }
  }
  // One super-block of the group against TB tokens' blocks xb: acc += W·x per row.
  template <int TB>
  [[gnu::always_inline]] static void block(const uint8_t* pb, const uint8_t* const* xbytes, float32x4_t* acc) {
    const BlockQ8_K* xb[TB];
#pragma GCC unroll 4
    for (int t = 0; t < TB; ++t) xb[t] = reinterpret_cast<const BlockQ8_K*>(xbytes[t]);
    int32x4_t isum[TB], msum[TB];
#pragma GCC unroll 4
    for (int t = 0; t < TB; ++t) isum[t] = msum[t] = vdupq_n_s32(0);
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      int32x4_t sl[TB], sh[TB];
#pragma GCC unroll 4
      for (int t = 0; t < TB; ++t) sl[t] = sh[t] = vdupq_n_s32(0);
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {  // elements 16h..16h+15 of both sub-blocks
        int8x16_t xl[TB], xh[TB];
#pragma GCC unroll 4
        for (int t = 0; t < TB; ++t) {
          xl[t] = vld1q_s8(xb[t]->qs + 64 * p + 16 * h);
          xh[t] = vld1q_s8(xb[t]->qs + 64 * p + 32 + 16 * h);
        }
        nibbles<TB>(pb + kQ + 128 * p + 64 * h, xl, xh, sl, sh);
      }
      const int32x4_t scl = widen4_u8(pb + kSc + 8 * p), sch = widen4_u8(pb + kSc + 8 * p + 4);
#pragma GCC unroll 4
      for (int t = 0; t < TB; ++t) isum[t] = vmlaq_s32(vmlaq_s32(isum[t], sl[t], scl), sh[t], sch);
    }
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const int32x4_t m = widen4_u8(pb + kM + 4 * j);
#pragma GCC unroll 4
      for (int t = 0; t < TB; ++t) msum[t] = vmlaq_n_s32(msum[t], m, xb[t]->bsums[2 * j] + xb[t]->bsums[2 * j + 1]);
    }
    const float32x4_t d = halves4(pb), dmin = halves4(pb + 8);
#pragma GCC unroll 4
    for (int t = 0; t < TB; ++t) {
      acc[t] = vfmaq_f32(acc[t], vcvtq_f32_s32(isum[t]), vmulq_n_f32(d, xb[t]->d));
      acc[t] = vfmsq_f32(acc[t], vcvtq_f32_s32(msum[t]), vmulq_n_f32(dmin, xb[t]->d));
    }
  }
};

struct Q6_KFormat {
  static constexpr int64_t kGroup = 4, kElems = 256;
  static constexpr size_t kSc = 8, kQl = 72, kQh = kQl + 512, kBlock = kQh + 256, kXBytes = sizeof(BlockQ8_K);
  static constexpr int64_t kSlab = int64_t{1} << 40;
  static constexpr int64_t kMaxTile = 2;
  static void pack_block(const uint8_t* w, size_t wrb, int64_t b, uint8_t* dst) {
    for (int64_t i = 0; i < kGroup; ++i) {
      const auto* blk = reinterpret_cast<const BlockQ6_K*>(w + i * wrb) + b;
      std::memcpy(dst + 2 * i, &blk->d, 2);
      for (int s = 0; s < 16; ++s) std::memcpy(dst + kSc + 4 * s + i, &blk->scales[s], 1);
      for (int n = 0; n < 2; ++n)
        for (int k = 0; k < 8; ++k) {
          for (int part = 0; part < 2; ++part)
            std::memcpy(dst + kQl + 16 * (16 * n + 8 * part + k) + 4 * i, blk->ql + 64 * n + 32 * part + 4 * k, 4);
          std::memcpy(dst + kQh + 16 * (8 * n + k) + 4 * i, blk->qh + 32 * n + 4 * k, 4);
        }
    }
  }
  // Chunks L.. of half n's quarter kh (k = 4kh + L): the four levels c against x[c].
  template <int TB, int L = 0>
  [[gnu::always_inline]] static void levels(const uint8_t* pb, int n, int kh, const int8x16_t (*x)[4],
                                            int32x4_t (*s)[4]) {
    if constexpr (L < 4) {
      const int k = 4 * kh + L;
      const uint8x16_t la = vld1q_u8(pb + kQl + 16 * (16 * n + k)), lb = vld1q_u8(pb + kQl + 16 * (16 * n + 8 + k));
      const uint8x16_t hb = vld1q_u8(pb + kQh + 16 * (8 * n + k));
      const uint8x16_t low4 = vdupq_n_u8(0x0F), three = vdupq_n_u8(0x30);
      const int8x16_t q[4] = {
          vreinterpretq_s8_u8(vorrq_u8(vandq_u8(la, low4), vandq_u8(vshlq_n_u8(hb, 4), three))),
          vreinterpretq_s8_u8(vorrq_u8(vandq_u8(lb, low4), vandq_u8(vshlq_n_u8(hb, 2), three))),
          vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(la, 4), vandq_u8(hb, three))),
          vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(lb, 4), vandq_u8(vshrq_n_u8(hb, 2), three)))};
#pragma GCC unroll 4
      for (int t = 0; t < TB; ++t)
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) s[t][c] = dot_lane<L>(s[t][c], q[c], x[t][c]);
      levels<TB, L + 1>(pb, n, kh, x, s);
    }
  }
  template <int TB>
  [[gnu::always_inline]] static void block(const uint8_t* pb, const uint8_t* const* xbytes, float32x4_t* acc) {
    const BlockQ8_K* xb[TB];
#pragma GCC unroll 4
    for (int t = 0; t < TB; ++t) xb[t] = reinterpret_cast<const BlockQ8_K*>(xbytes[t]);
    int32x4_t isum[TB], corr[TB];
#pragma GCC unroll 4
    for (int t = 0; t < TB; ++t) isum[t] = corr[t] = vdupq_n_s32(0);
#pragma GCC unroll 2
    for (int n = 0; n < 2; ++n)
#pragma GCC unroll 2
      for (int kh = 0; kh < 2; ++kh) {
        int8x16_t x[TB][4];
        int32x4_t s[TB][4];
#pragma GCC unroll 4
        for (int t = 0; t < TB; ++t)
#pragma GCC unroll 4
          for (int c = 0; c < 4; ++c) {
            x[t][c] = vld1q_s8(xb[t]->qs + 128 * n + 32 * c + 16 * kh);
            s[t][c] = vdupq_n_s32(0);
          }
        levels<TB>(pb, n, kh, x, s);
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
          const int32x4_t sc = widen4_s8(pb + kSc + 4 * (8 * n + 2 * c + kh));
#pragma GCC unroll 4
          for (int t = 0; t < TB; ++t) isum[t] = vmlaq_s32(isum[t], s[t][c], sc);
        }
      }
#pragma GCC unroll 16
    for (int sidx = 0; sidx < 16; ++sidx) {
      const int32x4_t sc = widen4_s8(pb + kSc + 4 * sidx);
#pragma GCC unroll 4
      for (int t = 0; t < TB; ++t) corr[t] = vmlaq_n_s32(corr[t], sc, xb[t]->bsums[sidx]);
    }
    const float32x4_t d = halves4(pb);
#pragma GCC unroll 4
    for (int t = 0; t < TB; ++t)
      acc[t] = vfmaq_f32(acc[t], vcvtq_f32_s32(vsubq_s32(isum[t], vshlq_n_s32(corr[t], 5))), vmulq_n_f32(d, xb[t]->d));
  }
};

// Activations: Q8_K blocks, quantize_activations' own.
size_t prep_k(int64_t n) { return static_cast<size_t>(n / 256) * sizeof(BlockQ8_K); }
void prepare_k(const float* x, int64_t n, uint8_t* out) { quantize_activations(DType::Q8_K, x, out, n); }

template <class F>
constexpr GroupTileFn kKTiles[4] = {group_tile<F, 1>, group_tile<F, 2>, nullptr, nullptr};  // kMaxTile 2

template <class F>
constexpr PackedKernels k_kernels_for{kGroup, F::kSlab * 256, pack_bytes<F>, pack<F>, prep_k,
                                      prepare_k, packed_gemm<F, kKTiles<F>>, /*one_token=*/true};

// Every repacked NEON layout of this copy (neon_packed_rows.h's and these).
inline const PackedKernels* packed_layout(DType w) {
  if (w == DType::Q4_K) return &k_kernels_for<Q4_KFormat>;
  if (w == DType::Q6_K) return &k_kernels_for<Q6_KFormat>;
  return packed_for(w);
}

}  // namespace
}  // namespace orchard::kernels
#endif  // __aarch64__
