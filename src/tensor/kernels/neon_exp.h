#pragma once
// e^x for 4 floats on NEON, for the softmax inside attention (neon_attention.cpp): the method
// of exp512 (avx512_exp.h) and exp256 (avx2_exp.h) — x = n·ln2 + r, e^r to degree 7, times 2^n
// built in the exponent bits as two halves, since n may reach 128. Below −87.3 the result is 0,
// above 88.7 it stays at e^88.7; NaN stays NaN.
#include <arm_neon.h>

namespace orchard::kernels {

// 2^k for integers k in the normal range, built in the exponent bits
inline float32x4_t pow2_neon(int32x4_t k) {
  return vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(k, vdupq_n_s32(127)), 23));
}

inline float32x4_t exp128(float32x4_t x) {
  const float32x4_t xc = vminq_f32(vdupq_n_f32(88.7f), x);  // FMIN: NaN in, NaN out
  const float32x4_t n = vrndnq_f32(vmulq_f32(xc, vdupq_n_f32(1.44269504088896341f)));
  float32x4_t r = vfmsq_f32(xc, n, vdupq_n_f32(0.693359375f));  // few mantissa bits: n·ln2_hi exact
  r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t p = vdupq_n_f32(1.0f / 5040);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 720), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 120), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 24), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 6), p, r);
  p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
  // 2^n = 2^h · 2^(n−h), h = n / 2 rounded down: both in the normal range for n in [−126, 128]
  const int32x4_t ni = vcvtq_s32_f32(vmaxq_f32(n, vdupq_n_f32(-126.0f)));
  const int32x4_t h = vshrq_n_s32(ni, 1);
  const float32x4_t e = vmulq_f32(vmulq_f32(p, pow2_neon(h)), pow2_neon(vsubq_s32(ni, h)));
  // x < −87.3 is false for NaN, so NaN lanes keep e (NaN)
  const uint32x4_t keep = vmvnq_u32(vcltq_f32(x, vdupq_n_f32(-87.3f)));
  return vreinterpretq_f32_u32(vandq_u32(keep, vreinterpretq_u32_f32(e)));
}

}  // namespace orchard::kernels
