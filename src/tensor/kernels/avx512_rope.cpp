// RoPE's rotation (tensor/ops.h's rope_rotate) on AVX-512: a token's rotations, one call per
// head, were a visible share of a batched decoding step for small heads as a scalar loop.
#if defined(__x86_64__)
#include <cstdint>

#include "tensor/kernels/kernels.h"

// Standard headers come first: clang rejects a target attribute pushed over their definitions.
#include "tensor/kernels/avx512_target_begin.h"

namespace orchard::kernels {
namespace {

// Every value is rope_rotate's fused scalar expression (tensor/ops.cpp), so the same bits:
//   a' = fma(a, cos, −(b·sin)),  b' = fma(a, sin, b·cos)
// for the pairs (i, i + half) (neox) or (2i, 2i + 1).
int64_t rope_rotate_avx512(float* head, int64_t n_rot, const float* cs, bool neox) {
  const int64_t half = n_rot / 2;
  int64_t i = 0;
  if (neox) {
    for (; i + 16 <= half; i += 16) {
      const __m512 a = _mm512_loadu_ps(head + i), b = _mm512_loadu_ps(head + half + i);
      const __m512 c = _mm512_loadu_ps(cs + i), s = _mm512_loadu_ps(cs + half + i);
      _mm512_storeu_ps(head + i, _mm512_fmsub_ps(a, c, _mm512_mul_ps(b, s)));
      _mm512_storeu_ps(head + half + i, _mm512_fmadd_ps(a, s, _mm512_mul_ps(b, c)));
    }
  } else {
    // Eight pairs per register: lane 2k holds a, lane 2k+1 holds b of pair k.
    const __m512i dup = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    const __m512i sign = _mm512_set1_epi32(INT32_MIN);
    for (; i + 8 <= half; i += 8) {
      const __m512 x = _mm512_loadu_ps(head + 2 * i);
      const __m512 c = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_loadu_ps(cs + i)));
      const __m512 s = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_loadu_ps(cs + half + i)));
      const __m512 first = _mm512_mask_blend_ps(0xAAAA, c, s);   // cos for a', sin for b'
      const __m512 second = _mm512_mask_blend_ps(0xAAAA, s, c);  // sin for a', cos for b'
      __m512i t = _mm512_castps_si512(_mm512_mul_ps(_mm512_movehdup_ps(x), second));  // b·sin, b·cos
      t = _mm512_mask_xor_epi32(t, 0x5555, t, sign);                                   // −(b·sin), b·cos
      _mm512_storeu_ps(head + 2 * i, _mm512_fmadd_ps(_mm512_moveldup_ps(x), first, _mm512_castsi512_ps(t)));
    }
  }
  return i;
}

}  // namespace

RopeFn avx512_rope() { return rope_rotate_avx512; }

}  // namespace orchard::kernels

#include "tensor/kernels/avx512_target_end.h"
#endif  // __x86_64__
