#pragma once
// Pieces shared by the AVX2 rows-in-lanes kernels (avx2_packed.cpp, avx2_packed_k.cpp). Include
// after avx2_target_begin.h, inside the file's anonymous namespace (<cstring> included before).

// The 4 bytes at p (four activations) in every 32-bit lane.
[[gnu::always_inline]] inline __m256i bcast4(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// Per row, its 8 lane sums added as ggml's hsum_float_8 adds a vector's lanes:
// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)).
[[gnu::always_inline]] inline __m256 ggml_lane_sum(const __m256 l[8]) {
  return _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(l[0], l[4]), _mm256_add_ps(l[2], l[6])),
                       _mm256_add_ps(_mm256_add_ps(l[1], l[5]), _mm256_add_ps(l[3], l[7])));
}
