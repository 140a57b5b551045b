#pragma once
// Q4_K and Q6_K prompt tiles (PackedKernels::gemm_many) for AVX-512 VNNI over the layouts of
// x86_packed_k.h. The AVX2 tiles there widen each 4-weight chunk's products to int16 pairs
// (maddubs), add them, and apply the scale with a madd: four instructions per chunk and token.
// vpdpbusd multiplies unsigned weights by signed activations and adds each lane's 4 products into
// int32 at once, so a chunk costs one instruction per token, and the sub-block's scale is one
// int32 multiply per sub-block and token. Every sum is exact, so each row and super-block gets
// the AVX2 tile's integer, and the float steps are the same: the same bits.
//
// With 32 vector registers, more tokens share each unpacked chunk (the weights' unpacking is
// paid once for all of them). Include after x86_packed_k.h and a Dpwssd (Dot::add as vpdpwssd).

// acc + vpdpbusd(w, the 4 bytes at p in every lane), with the broadcast folded into the
// instruction's memory operand (the compilers emit a separate broadcast load for set1, one more
// instruction per product where the products are what the tile is made of).
[[gnu::always_inline]] inline __m256i dpbusd_bcast4(__m256i acc, __m256i w, const uint8_t* p) {
  using Word [[gnu::may_alias]] = int32_t;
  __asm__("vpdpbusd %2%{1to8%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const Word*>(p)));
  return acc;
}

// The int32 scales of sub-blocks s and s + 1 (s even) of 8 rows, from their 16 bytes at p
// (pair_scale_at's order: [s rows 0..3 | s + 1 rows 0..3 | s rows 4..7 | s + 1 rows 4..7]).
template <bool is_signed>
[[gnu::always_inline]] inline void scale_words(const uint8_t* p, __m256i& even, __m256i& odd) {
  const __m128i b = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)),
                                     _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15));
  even = is_signed ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
  odd = is_signed ? _mm256_cvtepi8_epi32(_mm_srli_si128(b, 8)) : _mm256_cvtepu8_epi32(_mm_srli_si128(b, 8));
}

// Q4_K: per pair of sub-blocks, each token's two exact dot products (nibbles ≤ 15 times
// |x| ≤ 127, 32 elements: ≤ 60960) times the rows' scales; up to 6 tokens share each chunk.
struct VnniPairs {
  template <int TB>
  [[gnu::always_inline]] static void add(const uint8_t* pb, int p, const uint8_t* const* xb, __m256i* isum) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256i sa[TB], sb[TB];
#pragma GCC unroll 8
    for (int t = 0; t < TB; ++t) sa[t] = sb[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + kQOffset + 256 * p + 32 * k));
      const __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
#pragma GCC unroll 8
      for (int t = 0; t < TB; ++t) {
        sa[t] = dpbusd_bcast4(sa[t], lo, xb[t] + 64 * p + 4 * k);
        sb[t] = dpbusd_bcast4(sb[t], hi, xb[t] + 64 * p + 32 + 4 * k);
      }
    }
    __m256i sca, scb;
    scale_words<false>(pb + 32 + 16 * p, sca, scb);
#pragma GCC unroll 8
    for (int t = 0; t < TB; ++t)
      isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(_mm256_mullo_epi32(sa[t], sca), _mm256_mullo_epi32(sb[t], scb)));
  }
};

struct Q4_KVnniMany : Q4_KFormat {
  static constexpr int64_t kMaxTile = 6;
};
template <int TB>
constexpr GroupTileFn kQ4_KVnniTile = q4_k_many_tile<Dpwssd, TB, VnniPairs>;
constexpr GroupTileFn kQ4_KVnniTiles[6] = {kQ4_KVnniTile<1>, kQ4_KVnniTile<2>, kQ4_KVnniTile<3>,
                                           kQ4_KVnniTile<4>, kQ4_KVnniTile<5>, kQ4_KVnniTile<6>};

// Q6_K: per half and chunk half (4 chunks, the runs' first or second sub-blocks of 16), each
// token's 4 runs as exact dot products (6-bit weights ≤ 63 times |x| ≤ 127, 16 elements:
// ≤ 128016) times the rows' scales; the −32 offsets from the sub-blocks' sums (q6_sub_block_sums).
// Chunk half C (4 chunks: the runs' first or second sub-blocks of 16) of half H, added to each
// token's integers. H and C are template arguments so that every index below is a constant
// (clang with sanitizers would not unroll the loops over them).
template <int TB, int H, int C>
[[gnu::always_inline]] inline void q6_vnni_quarter(const uint8_t* pb, const uint8_t* const* xb, __m256i* isum) {
  __m256i s[TB][4];
#pragma GCC unroll 8
  for (int t = 0; t < TB; ++t)
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) s[t][r] = _mm256_setzero_si256();
#pragma GCC unroll 4
  for (int k = 4 * C; k < 4 * C + 4; ++k) {
    __m256i q[4];
    q6_unpack(pb + kQ6Q + 96 * (8 * H + k), q);
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r)
#pragma GCC unroll 8
      for (int t = 0; t < TB; ++t) s[t][r] = dpbusd_bcast4(s[t][r], q[r], xb[t] + 128 * H + 32 * r + 4 * k);
  }
  // Sub-block 8H + 2r + C's scales, for r = 0..3 (pair r's first or second).
  __m256i sc[4];
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {
    __m256i even, odd;
    scale_words<true>(pb + kQ6Scales + 64 * H + 16 * r, even, odd);
    sc[r] = C == 0 ? even : odd;
  }
#pragma GCC unroll 8
  for (int t = 0; t < TB; ++t)
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(s[t][r], sc[r]));
}

// Half H's −32 offsets for each token.
template <int TB, int H>
[[gnu::always_inline]] inline void q6_vnni_offsets(const uint8_t* pb, const uint8_t* const* xb, __m256i* isum) {
  __m256i scp[8], bias_sc[4];
  q6_scales(pb, H, scp);
  q6_bias_scales(scp, bias_sc);
#pragma GCC unroll 8
  for (int t = 0; t < TB; ++t)
    isum[t] = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(q6_sub_block_sums<Dpwssd>(bias_sc, xb[t], H), 5));
}

template <int TB>
void q6_k_vnni_many(const uint8_t* wg, int64_t nb, const uint8_t* x, size_t xrb, float* y, int64_t ldy, bool) {
  __m256 acc[TB];
#pragma GCC unroll 8
  for (int t = 0; t < TB; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* pb = wg + b * Q6_KFormat::kBlock;
    const uint8_t* xb[TB];
    __m256i isum[TB];
#pragma GCC unroll 8
    for (int t = 0; t < TB; ++t) {
      xb[t] = x + t * xrb + b * Q6_KFormat::kXBytes;
      isum[t] = _mm256_setzero_si256();
    }
    q6_vnni_quarter<TB, 0, 0>(pb, xb, isum);
    q6_vnni_quarter<TB, 0, 1>(pb, xb, isum);
    q6_vnni_offsets<TB, 0>(pb, xb, isum);
    q6_vnni_quarter<TB, 1, 0>(pb, xb, isum);
    q6_vnni_quarter<TB, 1, 1>(pb, xb, isum);
    q6_vnni_offsets<TB, 1>(pb, xb, isum);
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pb)));
#pragma GCC unroll 8
    for (int t = 0; t < TB; ++t) {
      float dx;
      std::memcpy(&dx, xb[t] + kQ6XD, 4);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(d, _mm256_set1_ps(dx)), acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < TB; ++t) _mm256_storeu_ps(y + t * ldy, acc[t]);
}

struct Q6_KVnniMany : Q6_KFormat {
  static constexpr int64_t kMaxTile = 4;
};
constexpr GroupTileFn kQ6_KVnniTiles[4] = {q6_k_vnni_many<1>, q6_k_vnni_many<2>, q6_k_vnni_many<3>,
                                           q6_k_vnni_many<4>};
