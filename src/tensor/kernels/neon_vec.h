#pragma once
// NEON's 4 floats as the ISA-neutral kernels (float_tiles.h, attend_tiles.h, half_group_tiles.h)
// want them.
#include <arm_neon.h>

#include <cstdint>

#include "tensor/kernels/neon_exp.h"

namespace orchard::kernels {

struct NeonF32 {
  using Reg = float32x4_t;
  static constexpr int kWidth = 4;
  static Reg zero() { return vdupq_n_f32(0); }
  static Reg splat(float x) { return vdupq_n_f32(x); }
  static Reg load(const float* p) { return vld1q_f32(p); }
  static Reg load(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
  // 4 levels (a 32-bit load, so the last group of a row reads nothing past it) widened to floats
  static Reg load_i8(const int8_t* p) {
    int32_t w;
    __builtin_memcpy(&w, p, sizeof w);
    return vcvtq_f32_s32(vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_s32(vdup_n_s32(w))))));
  }
  static void store(float* p, Reg r) { vst1q_f32(p, r); }
  static Reg fma(Reg a, Reg b, Reg acc) { return vfmaq_f32(acc, a, b); }
  static Reg fms(Reg a, Reg b, Reg c) { return vfmaq_f32(vnegq_f32(c), a, b); }  // a·b − c, one rounding
  static Reg add(Reg a, Reg b) { return vaddq_f32(a, b); }
  static Reg sub(Reg a, Reg b) { return vsubq_f32(a, b); }
  static Reg mul(Reg a, Reg b) { return vmulq_f32(a, b); }
  static Reg div(Reg a, Reg b) { return vdivq_f32(a, b); }
  static Reg max(Reg a, Reg b) { return vmaxq_f32(a, b); }
  static Reg exp(Reg x) { return exp128(x); }
  static float hmax(Reg v) { return vmaxvq_f32(v); }
  static float hsum(Reg v) { return vaddvq_f32(v); }
  static float sum(Reg v) { return vaddvq_f32(v); }
  static void load_pairs(const float* p, Reg& a, Reg& b) {
    const float32x4x2_t x = vld2q_f32(p);
    a = x.val[0], b = x.val[1];
  }
  static void store_pairs(float* p, Reg a, Reg b) { vst2q_f32(p, float32x4x2_t{{a, b}}); }
  static void prefetch(const void* p) { __builtin_prefetch(p, 0, 3); }
  static void prefetch_l2(const void* p) { __builtin_prefetch(p, 0, 2); }
};

}  // namespace orchard::kernels
