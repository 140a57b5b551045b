#pragma once
// AVX-512 Q8_0 quantization of activations, shared by the Q4_0 kernels. Include only from files
// compiled for AVX-512 (after their target pragma).
#include <immintrin.h>

#include <cstdint>

namespace orchard::kernels::x86 {
// Internal linkage on purpose: every kernel file compiles these helpers for its own target ISA,
// and one shared (ODR-merged) copy could run AVX-512 code on an AVX2-only CPU.
namespace {

// Q8_0 of one block of 32 activations, bit-identical to quantize_activations (ggml's x86
// rounding): d = amax/127, q = round-half-even(x · 127/amax), the hardware's own rounding.
inline __m256i quantize_block_q8_0(const float* x, float& d_rounded) {
  const __m512 a = _mm512_loadu_ps(x), b = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  d_rounded = _cvtsh_ss(_cvtss_sh(amax / 127.0f, _MM_FROUND_TO_NEAREST_INT));
  const __m512 mul = _mm512_set1_ps(id);
  const auto to_int = [&](__m512 v) {
    return _mm512_cvt_roundps_epi32(_mm512_mul_ps(v, mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  };
  return _mm256_set_m128i(_mm512_cvtsepi32_epi8(to_int(b)), _mm512_cvtsepi32_epi8(to_int(a)));
}

}  // namespace
}  // namespace orchard::kernels::x86
