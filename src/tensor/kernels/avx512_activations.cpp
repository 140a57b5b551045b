// Element-wise activations on AVX-512: libm's scalar expf made SwiGLU a visible share of a
// prompt (one e^x per FFN element per token).
#if defined(__x86_64__)
#include <cmath>
#include <cstdint>

#include "tensor/kernels/kernels.h"

// Standard headers come first: clang rejects a target attribute pushed over their definitions.
#include "tensor/kernels/avx512_target_begin.h"

#include "tensor/kernels/avx512_exp.h"

namespace orchard::kernels {
namespace {

// out = g·σ(g)·u = g·u / (1 + e^−g). Where e^−g saturates (g < −88.7) the quotient is ~0, where
// it flushes to 0 (g > 87.3) it is g·u: the limits of the exact function.
void swiglu_avx512(const float* gate, const float* up, float* out, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i), u = _mm512_maskz_loadu_ps(m, up + i);
    const __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), g));
    _mm512_mask_storeu_ps(out + i, m, _mm512_div_ps(_mm512_mul_ps(g, u), _mm512_add_ps(one, e)));
  }
}

}  // namespace

SwigluFn avx512_swiglu() { return swiglu_avx512; }

}  // namespace orchard::kernels

#include "tensor/kernels/avx512_target_end.h"
#endif  // __x86_64__
