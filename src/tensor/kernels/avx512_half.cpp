// Floats to halves and back on AVX-512 (F16C's conversions widened): the KV cache converts a
// token's keys and values on every step, and a prompt's attention its keys once per tile.
#if defined(__x86_64__)
#include <cstdint>

#include "tensor/kernels/kernels.h"

// Standard headers come first: clang rejects a target attribute pushed over their definitions.
#include "tensor/kernels/avx512_target_begin.h"

namespace orchard::kernels {
namespace {

__mmask16 first(int64_t n) { return static_cast<__mmask16>(n >= 16 ? 0xFFFF : (1u << n) - 1); }

// vcvtps2ph rounds to nearest even whatever MXCSR says when given the rounding mode, and keeps
// NaNs quiet with their top payload bits, as fp32_to_fp16 does.
void to_half_avx512(const float* x, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = first(n - i);
    const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_mask_storeu_epi16(out + i, m, h);
  }
}

void to_float_avx512(const uint16_t* h, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = first(n - i);
    _mm512_mask_storeu_ps(out + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, h + i)));
  }
}

constexpr HalfFns kHalf{to_half_avx512, to_float_avx512};

}  // namespace

const HalfFns* avx512_half() { return &kHalf; }

}  // namespace orchard::kernels

#include "tensor/kernels/avx512_target_end.h"
#endif  // __x86_64__
