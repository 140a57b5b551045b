// AArch64 NEON kernels (Apple silicon, Graviton, Ampere, Raspberry Pi 4+). NEON is mandatory on
// AArch64; the int8 dot-product instruction (SDOT, Armv8.2 "dotprod", every Apple M chip) is used
// when the compiler targets it, with a widening-multiply fallback otherwise.
#if defined(__aarch64__)
#include <arm_neon.h>

#include "tensor/f16.h"
#include "tensor/kernels/float_tiles.h"
#include "tensor/kernels/gemm_tiles.h"
#include "tensor/kernels/kernels.h"
#include "tensor/quant_blocks.h"

namespace orchard::kernels {
namespace {

using detail::BlockQ4_0;
using detail::BlockQ8_0;

inline float f16(uint16_t h) {
  return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

// Four int32 lanes whose sum is Σ a_i·b_i over 16 int8 pairs.
inline int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if defined(__ARM_FEATURE_DOTPROD)
  return vdotq_s32(acc, a, b);
#else
  const int16x8_t lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));
  const int16x8_t hi = vmull_high_s8(a, b);
  return vpadalq_s16(vpadalq_s16(acc, lo), hi);
#endif
}

template <int RB, int TB>
struct Q4_0Tile {
  static void run(const uint8_t* w, size_t wrb, const uint8_t* x, size_t xrb, int64_t nb, float* y,
                  int64_t ldy) {
    float32x4_t acc[RB][TB];
    for (int r = 0; r < RB; ++r)
      for (int t = 0; t < TB; ++t) acc[r][t] = vdupq_n_f32(0);
    const uint8x16_t low4 = vdupq_n_u8(0x0F);
    const int8x16_t eight = vdupq_n_s8(8);
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
        const auto* wb = reinterpret_cast<const BlockQ4_0*>(w + r * wrb) + b;
        const uint8x16_t q = vld1q_u8(wb->qs);
        const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, low4)), eight);
        const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight);
        const float dw = f16(wb->d);
        for (int t = 0; t < TB; ++t) {
          const int32x4_t s = dot16(dot16(vdupq_n_s32(0), lo, x0[t]), hi, x1[t]);
          acc[r][t] = vmlaq_n_f32(acc[r][t], vcvtq_f32_s32(s), dw * dx[t]);
        }
      }
    }
    for (int r = 0; r < RB; ++r)
      for (int t = 0; t < TB; ++t) y[t * ldy + r] = vaddvq_f32(acc[r][t]);
  }
};

template <int RB, int TB>
struct Q8_0Tile {
  static void run(const uint8_t* w, size_t wrb, const uint8_t* x, size_t xrb, int64_t nb, float* y,
                  int64_t ldy) {
    float32x4_t acc[RB][TB];
    for (int r = 0; r < RB; ++r)
      for (int t = 0; t < TB; ++t) acc[r][t] = vdupq_n_f32(0);
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
        const auto* wb = reinterpret_cast<const BlockQ8_0*>(w + r * wrb) + b;
        const int8x16_t w0 = vld1q_s8(wb->qs), w1 = vld1q_s8(wb->qs + 16);
        const float dw = f16(wb->d);
        for (int t = 0; t < TB; ++t) {
          const int32x4_t s = dot16(dot16(vdupq_n_s32(0), w0, x0[t]), w1, x1[t]);
          acc[r][t] = vmlaq_n_f32(acc[r][t], vcvtq_f32_s32(s), dw * dx[t]);
        }
      }
    }
    for (int r = 0; r < RB; ++r)
      for (int t = 0; t < TB; ++t) y[t * ldy + r] = vaddvq_f32(acc[r][t]);
  }
};

struct V128 {
  using Reg = float32x4_t;
  static constexpr int kWidth = 4;
  static Reg zero() { return vdupq_n_f32(0); }
  static Reg fma(Reg a, Reg b, Reg acc) { return vfmaq_f32(acc, a, b); }
  static float sum(Reg v) { return vaddvq_f32(v); }
};

struct LoadF32 {
  static float32x4_t load(const uint8_t* p, int64_t i) { return vld1q_f32(reinterpret_cast<const float*>(p) + i); }
  static float one(const uint8_t* p, int64_t i) { return reinterpret_cast<const float*>(p)[i]; }
};
struct LoadF16 {
  static float32x4_t load(const uint8_t* p, int64_t i) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p) + i)));
  }
  static float one(const uint8_t* p, int64_t i) { return f16(reinterpret_cast<const uint16_t*>(p)[i]); }
};

// bf16 is the top half of an f32: widen to 32 bits with a 16-bit shift.
struct LoadBF16 {
  static float32x4_t load(const uint8_t* p, int64_t i) {
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p) + i), 16));
  }
  static float one(const uint8_t* p, int64_t i) {
    const uint32_t bits = static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(p)[i]) << 16;
    float f;
    __builtin_memcpy(&f, &bits, sizeof f);
    return f;
  }
};

template <int RB, int TB> using F32Tile = FloatTiles<V128, LoadF32>::Tile<RB, TB>;
template <int RB, int TB> using F16Tile = FloatTiles<V128, LoadF16>::Tile<RB, TB>;
template <int RB, int TB> using BF16Tile = FloatTiles<V128, LoadBF16>::Tile<RB, TB>;

// FCVTN / FCVTL: nearest even (the default rounding mode) and quiet NaNs keeping their top
// payload bits, as tensor/f16.h; four at a time, the rest one by one.
void to_half_neon(const float* x, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1_u16(out + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
  for (; i < n; ++i) out[i] = fp32_to_fp16(x[i]);
}

void to_float_neon(const uint16_t* h, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(out + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h + i))));
  for (; i < n; ++i) out[i] = fp16_to_fp32(h[i]);
}

constexpr HalfFns kHalf{to_half_neon, to_float_neon};

}  // namespace

const HalfFns* neon_half() { return &kHalf; }

Kernels lookup_neon(DType w) {
  switch (w) {
    case DType::Q4_0: return {gemm_tiled<Q4_0Tile>};
    case DType::Q8_0: return {gemm_tiled<Q8_0Tile>};
    case DType::F32: return {gemm_tiled<F32Tile>};
    case DType::F16: return {gemm_tiled<F16Tile>};
    case DType::BF16: return {gemm_tiled<BF16Tile>};
    default: return {};
  }
}

}  // namespace orchard::kernels
#endif  // __aarch64__
