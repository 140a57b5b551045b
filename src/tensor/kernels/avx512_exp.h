#pragma once
// e^x for 16 floats on AVX-512, for the softmax inside attention (libm's scalar expf took a
// tenth of a decode step there). Include after avx512_target_begin.h.
//
// x = n·ln2 + r with n = round(x/ln2), |r| ≤ ln2/2; e^r by its Taylor series to degree 7
// (truncation < 2e-9 relative on that interval, below float rounding); then scalef multiplies
// by 2^n exactly. Below −87.3 the result is flushed to 0, above 88.7 it stays at e^88.7; NaN
// stays NaN.
namespace orchard::kernels {

inline __m512 exp512(__m512 x) {
  const __m512 log2e = _mm512_set1_ps(1.44269504088896341f);
  const __m512 ln2_hi = _mm512_set1_ps(0.693359375f);  // few mantissa bits: n·ln2_hi is exact
  const __m512 ln2_lo = _mm512_set1_ps(-2.12194440e-4f);
  // min returns its second operand when one is NaN: NaN goes through.
  const __m512 xc = _mm512_min_ps(_mm512_set1_ps(88.7f), x);;
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, ln2_hi, xc);
  r = _mm512_fnmadd_ps(n, ln2_lo, r);
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512 e = _mm512_scalef_ps(p, n);
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_NLT_UQ), e);
}

}  // namespace orchard::kernels
