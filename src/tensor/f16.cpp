// IEEE binary16 and bfloat16 conversions done on the bits, so the result never depends on the
// compiler, the FPU's rounding mode or flush-to-zero flags.
#include "tensor/f16.h"

namespace orchard {
namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  // Inf, or a NaN made quiet with its payload kept, as F16C's vcvtph2ps and Arm's FCVTL do.
  if (exp == 0x1F) return float_of(sign | 0x7F800000u | (mant << 13) | (mant != 0 ? 0x400000u : 0u));
  if (exp != 0) return float_of(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return float_of(sign);
  // Subnormal half: normalise into a float (every half subnormal is a float normal).
  uint32_t e = 113;  // exponent of 2^-14, the subnormal scale, in float bias
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  return float_of(sign | (e << 23) | ((mant & 0x3FFu) << 13));
}

uint16_t fp32_to_fp16(float f) {
  const uint32_t x = bits_of(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7FFFFFFFu;
  // NaN stays a quiet NaN with the top payload bits, as x86's F16C (vcvtps2ph) does; llama.cpp
  // on x86 converts through that instruction.
  if (ax > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((ax >> 13) & 0x3FFu));
  // 65520 is the midpoint between 65504 (largest half, odd mantissa) and 65536: ties to even
  // round it up, so it and everything above becomes infinity.
  if (ax >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);
  if (ax >= 0x38800000u) {  // result is a normal half (|f| >= 2^-14 after rounding)
    const uint32_t rounded = ax + 0xFFFu + ((ax >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
  }
  // 2^-25 is exactly half of the smallest subnormal; ties to even make it zero.
  if (ax <= 0x33000000u) return sign;
  // Subnormal half: the value in units of 2^-24 is mant * 2^(e - 126).
  const uint32_t e = ax >> 23;
  const uint32_t mant = (ax & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126u - e;  // 14..24
  uint32_t h = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (h & 1u))) ++h;  // may carry into the smallest normal: fine
  return static_cast<uint16_t>(sign | h);
}

uint16_t fp32_to_bf16(float f) {
  const uint32_t x = bits_of(f);
  // NaN: keep sign and top payload, force the quiet bit (ggml_compute_fp32_to_bf16); plain
  // rounding could carry a NaN's payload into infinity.
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  // Round to nearest even. Subnormals are rounded, not flushed (ggml stopped flushing in 2024,
  // llama.cpp PR 7843), and overflow rounds to infinity naturally.
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace orchard
