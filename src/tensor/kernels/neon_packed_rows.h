#pragma once
// Q4_0 and Q8_0 × one or many tokens on NEON over weights repacked at load, 4 rows at a time:
// avx2_packed.cpp's design at NEON's width, through packed_rows.h's loops.
//
// SDOT's by-element form multiplies 4 bytes by 4 bytes into each int32 lane with the other
// operand's 4 bytes taken from one lane: packing puts 4 *rows* in the 4 lanes — lane i holds 4
// consecutive weights of row i — so each instruction advances 4 dot products by 4 elements, with
// no horizontal sums and one float step per block for the 4 rows (the row-major tiles of
// neon_quant_tiles.h take one per row, plus a horizontal sum). Per block of 32 elements and
// group of 4 rows the packed form is
//   uint16 d[4]             the rows' fp16 scales
//   Q4_0: uint8 q[4][4][4]  chunk h, row i: bytes qs[4h..4h+3] of row i's block (low nibbles are
//                           elements 4h..4h+3, high nibbles elements 16+4h..16+4h+3)
//   Q8_0: int8  q[8][4][4]  chunk g, row i: qs[4g..4g+3] of row i's block
// 72 (Q4_0) or 136 (Q8_0) bytes, the same as the 4 original blocks. Activations are prepared
// per token as Q8_0 (reference-exact) into int8 q[32], float d, int32 c per block (40 bytes, the
// x86 layout), and
//   dot_row = Σ_blocks fma(float(Σ_i q_w,i·x_i + c), dw·dx, ·),   c = −8·Σx for Q4_0, 0 for Q8_0
// — each block's sum exact, then the row-major tiles' float steps, so a row gets the same bits
// from either layout and the SMMLA prompt tiles.
//
// Compiled twice, as neon_quant_tiles.h: neon_packed.cpp for the build's target and
// neon_packed_dotprod.cpp for SDOT, chosen at run time; everything here is in an unnamed
// namespace so the copies never meet at link time.
#if defined(__aarch64__)
#include <arm_neon.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tensor/f16.h"
#include "tensor/kernels/kernels.h"
#include "tensor/kernels/neon_int8.h"
#include "tensor/quant_blocks.h"

namespace orchard::kernels {
namespace {

using detail::BlockQ4_0;
using detail::BlockQ8_0;
using neon::dot_lane;

#include "tensor/kernels/packed_rows.h"

constexpr int64_t kGroup = 4;

// Row i's block b, 4 bytes at a time: chunk k of the packed block holds bytes qs[4k..4k+3] of
// every row, row after row, after the rows' 4 fp16 scales.
template <class Block, int kChunks>
void pack_chunks(const uint8_t* w, size_t wrb, int64_t b, uint8_t* dst) {
  for (int64_t i = 0; i < kGroup; ++i) {
    const auto* blk = reinterpret_cast<const Block*>(w + i * wrb) + b;
    std::memcpy(dst + 2 * i, &blk->d, 2);
    for (int k = 0; k < kChunks; ++k) std::memcpy(dst + 8 + k * 16 + i * 4, blk->qs + 4 * k, 4);
  }
}

// One block of a group against TB tokens' prepared blocks xb (F::dots: the integer sums):
// acc[t] += fma(float(s + c), dw·dx) per row.
template <class F, int TB>
[[gnu::always_inline]] inline void block32(const uint8_t* pb, const uint8_t* const* xb, float32x4_t* acc) {
  const float32x4_t dw = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(pb))));
  int8x16_t x0[TB], x1[TB];
  int32x4_t s[TB];
#pragma GCC unroll 8
  for (int t = 0; t < TB; ++t) {
    x0[t] = vld1q_s8(reinterpret_cast<const int8_t*>(xb[t]));
    x1[t] = vld1q_s8(reinterpret_cast<const int8_t*>(xb[t]) + 16);
    s[t] = vdupq_n_s32(0);
  }
  F::template dots<TB>(pb, x0, x1, s);
#pragma GCC unroll 8
  for (int t = 0; t < TB; ++t) {
    float dx;
    int32_t c;
    std::memcpy(&dx, xb[t] + 32, 4);
    std::memcpy(&c, xb[t] + 36, 4);
    const float32x4_t sf = vcvtq_f32_s32(vaddq_s32(s[t], vdupq_n_s32(c)));
    acc[t] = vfmaq_f32(acc[t], sf, vmulq_f32(dw, vdupq_n_f32(dx)));
  }
}

struct Q4_0Format {
  static constexpr int64_t kGroup = 4, kElems = 32;
  static constexpr size_t kXBytes = kXBlock;
  // 4 tokens: their float and integer sums, their activations (2 registers each) and a block's
  // 8 unpacked chunks fit NEON's 32 registers.
  static constexpr int64_t kMaxTile = 4;
  static constexpr size_t kBlock = 8 + 64;
  // A group's slab of a long row leaves one token's activations in L1.
  static constexpr int64_t kSlab = 64;
  static constexpr int32_t kBias = -8;
  static constexpr auto pack_block = pack_chunks<BlockQ4_0, 4>;
  // s[t] = Σ_i q_w,i·x_t,i over the block for the 4 rows, tokens' activations x0/x1 (elements
  // 0-15, 16-31).
  template <int TB, int H = 0>
  [[gnu::always_inline]] static void dots(const uint8_t* pb, const int8x16_t* x0, const int8x16_t* x1, int32x4_t* s) {
    if constexpr (H < 4) {
      const uint8x16_t v = vld1q_u8(pb + 8 + 16 * H);
      const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F)));
      const int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
#pragma GCC unroll 8
      for (int t = 0; t < TB; ++t) s[t] = dot_lane<H>(dot_lane<H>(s[t], lo, x0[t]), hi, x1[t]);
      dots<TB, H + 1>(pb, x0, x1, s);
    }
  }
  template <int TB>
  [[gnu::always_inline]] static void block(const uint8_t* pb, const uint8_t* const* xb, float32x4_t* acc) {
    block32<Q4_0Format, TB>(pb, xb, acc);
  }
};

struct Q8_0Format {
  static constexpr int64_t kGroup = 4, kElems = 32;
  static constexpr size_t kXBytes = kXBlock;
  static constexpr int64_t kMaxTile = 4;
  static constexpr size_t kBlock = 8 + 128;
  static constexpr int64_t kSlab = 64;
  static constexpr int32_t kBias = 0;
  static constexpr auto pack_block = pack_chunks<BlockQ8_0, 8>;
  template <int TB, int G = 0>
  [[gnu::always_inline]] static void dots(const uint8_t* pb, const int8x16_t* x0, const int8x16_t* x1, int32x4_t* s) {
    if constexpr (G < 8) {
      const int8x16_t w = vld1q_s8(reinterpret_cast<const int8_t*>(pb) + 8 + 16 * G);
#pragma GCC unroll 8
      for (int t = 0; t < TB; ++t) s[t] = dot_lane<G % 4>(s[t], w, G < 4 ? x0[t] : x1[t]);
      dots<TB, G + 1>(pb, x0, x1, s);
    }
  }
  template <int TB>
  [[gnu::always_inline]] static void block(const uint8_t* pb, const uint8_t* const* xb, float32x4_t* acc) {
    block32<Q8_0Format, TB>(pb, xb, acc);
  }
};

// One token's activations: per block the Q8_0 quantization, bit-identical to
// quantize_activations (d = amax/127 stored as fp16, q = round-half-even(x · 127/amax)), its
// scale widened back to a float, and F::kBias·Σq.
template <class F>
void prepare(const float* x, int64_t n, uint8_t* out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + 32 * b;
    float32x4_t v[8];
    float32x4_t amax = vdupq_n_f32(0);
    for (int k = 0; k < 8; ++k) {
      v[k] = vld1q_f32(xb + 4 * k);
      amax = vmaxq_f32(amax, vabsq_f32(v[k]));
    }
    const float m = vmaxvq_f32(amax);
    const float id = m != 0.0f ? 127.0f / m : 0.0f;
    int32x4_t sum = vdupq_n_s32(0);
    int16x8_t q16[4];
    for (int k = 0; k < 4; ++k) {
      const int32x4_t a = vcvtnq_s32_f32(vmulq_f32(v[2 * k], vdupq_n_f32(id)));  // nearest, ties even
      const int32x4_t c = vcvtnq_s32_f32(vmulq_f32(v[2 * k + 1], vdupq_n_f32(id)));
      sum = vaddq_s32(sum, vaddq_s32(a, c));
      q16[k] = vcombine_s16(vmovn_s32(a), vmovn_s32(c));
    }
    uint8_t* dst = out + b * kXBlock;
    vst1q_s8(reinterpret_cast<int8_t*>(dst), vcombine_s8(vmovn_s16(q16[0]), vmovn_s16(q16[1])));
    vst1q_s8(reinterpret_cast<int8_t*>(dst) + 16, vcombine_s8(vmovn_s16(q16[2]), vmovn_s16(q16[3])));
    const float d = fp16_to_fp32(fp32_to_fp16(m / 127.0f));
    const int32_t c = F::kBias * vaddvq_s32(sum);
    std::memcpy(dst + 32, &d, 4);
    std::memcpy(dst + 36, &c, 4);
  }
}

// 4 rows × TB tokens over nb blocks (F::block: one block's step, F::kXBytes: a token's prepared
// bytes per block), continuing the sums in y unless `first` (floats parked in y resume the one
// chain exactly, so slabs do not change a bit).
template <class F, int TB>
void group_tile(const uint8_t* wg, int64_t nb, const uint8_t* x, size_t xrb, float* y, int64_t ldy, bool first) {
  float32x4_t acc[TB];
#pragma GCC unroll 8
  for (int t = 0; t < TB; ++t) acc[t] = first ? vdupq_n_f32(0) : vld1q_f32(y + t * ldy);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* pb = wg + b * F::kBlock;
    if constexpr (TB == 1) {  // one token is bound by the weight stream: ask ahead for it
      for (size_t o = 0; o < F::kBlock; o += 64) __builtin_prefetch(pb + kStreamAhead + o, 0, 3);
    }
    const uint8_t* xb[TB];
#pragma GCC unroll 8
    for (int t = 0; t < TB; ++t) xb[t] = x + t * xrb + b * F::kXBytes;
    F::template block<TB>(pb, xb, acc);
  }
#pragma GCC unroll 8
  for (int t = 0; t < TB; ++t) vst1q_f32(y + t * ldy, acc[t]);
}

template <class F>
constexpr GroupTileFn kTiles[4] = {group_tile<F, 1>, group_tile<F, 2>, group_tile<F, 3>, group_tile<F, 4>};

template <class F>
constexpr PackedKernels kernels_for{kGroup,        F::kSlab * 32, pack_bytes<F>, pack<F>, prep_bytes<F>,
                                    prepare<F>,    packed_gemm<F, kTiles<F>>, /*one_token=*/true};

inline const PackedKernels* packed_for(DType w) {
  if (w == DType::Q4_0) return &kernels_for<Q4_0Format>;
  if (w == DType::Q8_0) return &kernels_for<Q8_0Format>;
  return nullptr;
}

}  // namespace
}  // namespace orchard::kernels
#endif  // __aarch64__
