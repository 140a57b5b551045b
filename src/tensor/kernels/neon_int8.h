#pragma once
// Helpers shared by the NEON files (AArch64 only).
#if defined(__aarch64__)
#include <arm_neon.h>

#include <cstdint>

namespace orchard::kernels::neon {
// Unnamed: a file compiled for SDOT and one without each keep their own dot16.
namespace {

inline float f16(uint16_t h) { return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0); }

// Four int32 lanes whose sum is Σ a_i·b_i over 16 int8 pairs: SDOT where the build targets the
// dot-product extension (Armv8.2 "dotprod", every Apple M chip) or a file compiled for it defines
// ORCHARD_NEON_SDOT (clang's target attribute sets no feature macro), widening multiplies otherwise.
inline int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if defined(__ARM_FEATURE_DOTPROD) || defined(ORCHARD_NEON_SDOT)
  return vdotq_s32(acc, a, b);
#else
  const int16x8_t lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));
  const int16x8_t hi = vmull_high_s8(a, b);
  return vpadalq_s16(vpadalq_s16(acc, lo), hi);
#endif
}

// acc[i] += Σ_k a[4i + k]·b[4L + k]: four rows' 4-byte runs (a) against one 4-byte run of b
// broadcast, SDOT's by-element form where the build has it.
template <int L>
inline int32x4_t dot_lane(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if defined(__ARM_FEATURE_DOTPROD) || defined(ORCHARD_NEON_SDOT)
  return vdotq_laneq_s32(acc, a, b, L);
#else
  const int8x16_t bb = vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(b), L));
  // Products of runs 0-1 and 2-3, pairs added (|pair| ≤ 2·128·127, no int16 overflow), then
  // pairs of pairs into the int32 lanes.
  return vpadalq_s16(acc, vpaddq_s16(vmull_s8(vget_low_s8(a), vget_low_s8(bb)), vmull_high_s8(a, bb)));
#endif
}

}  // namespace
}  // namespace orchard::kernels::neon
#endif  // __aarch64__
