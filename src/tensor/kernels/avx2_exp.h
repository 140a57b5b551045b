#pragma once
// e^x for 8 floats on AVX2, for the softmax inside attention (avx2_attention.cpp). Include after
// avx2_target_begin.h.
namespace orchard::kernels {

// e^x for 8 floats, as exp512 (avx512_exp.h) computes it: x = n·ln2 + r, e^r to degree 7, times
// 2^n — here as two powers of two built in the exponent bits, since n may reach 128. Below −87.3
// the result is 0; NaN stays NaN.
// 2^k for integers k in the normal range, built in the exponent bits
inline __m256 pow2(__m256i k) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23));
}

inline __m256 exp256(__m256 x) {
  const __m256 xc = _mm256_min_ps(_mm256_set1_ps(88.7f), x);  // NaN: min returns x
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  // 2^n = 2^h · 2^(n−h), h = n / 2 rounded down: both in the normal range for n in [−126, 128]
  const __m256i ni = _mm256_cvtps_epi32(_mm256_max_ps(n, _mm256_set1_ps(-126.0f)));
  const __m256i h = _mm256_srai_epi32(ni, 1);
  const __m256 e = _mm256_mul_ps(_mm256_mul_ps(p, pow2(h)), pow2(_mm256_sub_epi32(ni, h)));
  return _mm256_and_ps(_mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_NLT_UQ), e);
}

}  // namespace orchard::kernels
