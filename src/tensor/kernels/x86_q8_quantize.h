#pragma once
// AVX-512 Q8_0 quantization of activations, shared by the Q4_0 kernels. Include only from files
// compiled for AVX-512 (after their target pragma).
#include <immintrin.h>

#include <cstdint>

namespace orchard::kernels::x86 {
// Internal linkage on purpose: every kernel file compiles these helpers for its own target ISA,
// and one shared (ODR-merged) copy could run AVX-512 code on an AVX2-only CPU.
namespace {

// Q8_0 of one block of 32 activations, bit-identical to the reference quantizer: d = amax/127,
// q = roundf(x / d). roundf rounds halves away from zero, which the hardware's round-to-even
// does not; truncating x + copysign(0.5⁻, x) (0.5⁻ the float just below one half) gives
// roundf's result for every float of magnitude up to 129 (checked exhaustively), and
// |x / d| ≤ 127 here.
inline __m256i quantize_block_q8_0(const float* x, float& d_rounded) {
  const __m512 a = _mm512_loadu_ps(x), b = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  d_rounded = _cvtsh_ss(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
  auto round_half_away = [&](__m512 v) {
    const __m512i scaled = _mm512_castps_si512(_mm512_mul_ps(v, _mm512_set1_ps(id)));
    // (scaled & sign) | bits(0.5⁻): 0.5⁻ with the sign of scaled, in AVX512F integer ops.
    const __m512i half = _mm512_ternarylogic_epi32(scaled, _mm512_set1_epi32(INT32_MIN),
                                                   _mm512_set1_epi32(0x3EFFFFFF), 0xEA);
    return _mm512_cvttps_epi32(_mm512_add_ps(_mm512_castsi512_ps(scaled), _mm512_castsi512_ps(half)));
  };
  return _mm256_set_m128i(_mm512_cvtsepi32_epi8(round_half_away(b)), _mm512_cvtsepi32_epi8(round_half_away(a)));
}

}  // namespace
}  // namespace orchard::kernels::x86
