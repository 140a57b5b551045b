#pragma once
// Q4_K and Q6_K × one or many tokens on AVX2 (and AVX-512 VNNI) over weights repacked at load time, 8 rows in the
// 8 int32 lanes as avx2_packed.cpp does for Q4_0 (see there for the plan), per super-block of
// 256. Both keep ggml's rounding: its AVX2 dot products hold 8 int32 lanes (lane k: elements
// 4k..4k+3 of every 32-element run) exact across a super-block, then one FMA per lane and
// super-block, and add the lanes at the end; chunk k of these layouts is lane k of 8 rows, so 8
// accumulators per row give the same chains. Their many-token kernels (PackedKernels::gemm_many,
// prompts where bits may depend on the batch) keep one exact integer per row and super-block.
//
// Q4_K:
// A Q4_K super-block is 8 sub-blocks of 32 with 6-bit scales sc_j and mins m_j:
//   W·x = d·dx·Σ_j sc_j·(q_j · x_j) − dmin·dx·Σ_j m_j·Σx_j        (q nibbles 0..15)
// Per group of 8 rows and super-block the packed form is
//   uint16 d[8], dmin[8]     the rows' scales
//   uint8  sc[4][16]         sub-block pair p: sc_2p of rows 0..3, sc_2p+1 of rows 0..3, then
//                            the same of rows 4..7 (the 6-bit scales unpacked once, at load;
//                            ordered so that one widening and two unpacks give (sc, sc) pairs)
//   uint8  m[4][8][2]        sub-block pair p, row i: m_2p, m_2p+1 (ready for one madd)
//   uint8  q[4][8][8][4]     pair p, chunk k, row i: bytes qs[32p + 4k .. +3] of row i (low
//                            nibbles: sub-block 2p, elements 4k..4k+3; high: sub-block 2p+1)
// 1184 bytes for 8 original blocks of 1152 (+2.8 %, the unpacked scales and mins). A token is
// prepared as int8 q[256], float d and, per sub-block pair, its two sums Σx as int16 pairs.
//
// Products: maddubs of nibbles (≤ 15) and activations (|x| ≤ 127), pair sums ≤ 3810, then one
// madd by (sc, sc) per chunk: exact int32. The float steps are ggml's (see lane_tile).
//
// Every product below is 8 rows in the 8 int32 lanes of a 256-bit register; `Dot::add(s, a, b)`
// is s + madd(a, b) (int16 pairs multiplied and added into int32): two instructions on AVX2, one
// (vpdpwssd) with AVX-512 VNNI. Same integers either way, so the same bits. Include after a
// target_begin header, inside the file's anonymous namespace, after avx2_lanes.h and
// packed_rows.h (<algorithm>, <cstring>, kernels.h, quant.h and quant_blocks.h included before).

using detail::BlockQ4_K;
using detail::BlockQ6_K;
using detail::BlockQ8_K;

constexpr int64_t kRows = 8;
constexpr size_t kQOffset = 32 + 64 + 64;
constexpr size_t kXD = 256, kXSums = 260;  // offsets in a prepared block (q at 0)

// Where row i's scale of sub-block s sits among 16 bytes per pair of sub-blocks (s even, s + 1):
// [s: rows 0..3 | s + 1: rows 0..3 | s: rows 4..7 | s + 1: rows 4..7], so that widening to
// int16 puts rows 0..3 in the low half and 4..7 in the high half of each 128-bit lane pair, and
// unpacking each half with itself gives one sub-block's 8 rows as (sc, sc) int16 pairs.
constexpr size_t pair_scale_at(int s, int64_t i) {
  return static_cast<size_t>(16 * (s / 2) + 4 * (s % 2) + 8 * (i / 4) + i % 4);
}

// The (sc, sc) pairs of sub-blocks s and s + 1 (s even) from their 16 bytes at p: int8 scales
// (Q6_K) or uint8 (Q4_K), 8 rows in the int32 lanes of each.
template <bool is_signed>
[[gnu::always_inline]] inline void scale_pairs(const uint8_t* p, __m256i& even, __m256i& odd) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m256i v = is_signed ? _mm256_cvtepi8_epi16(b) : _mm256_cvtepu8_epi16(b);
  even = _mm256_unpacklo_epi16(v, v);
  odd = _mm256_unpackhi_epi16(v, v);
}

struct Q4_KFormat {
  static constexpr int64_t kGroup = kRows, kElems = 256;
  static constexpr size_t kBlock = kQOffset + 1024, kXBytes = 256 + 4 + 16;
  // A whole row is one slab: 14 super-blocks of a 3584-wide row are 16 KB per group.
  static constexpr int64_t kSlab = int64_t{1} << 40;
  // One token per pass (its 12 lane chains fill the registers); a group's row stays in L1 or L2
  // for the next token of a prompt.
  static constexpr int64_t kMaxTile = 1;
  static void pack_block(const uint8_t* w, size_t wrb, int64_t b, uint8_t* dst) {
    for (int64_t i = 0; i < kRows; ++i) {
      const auto* blk = reinterpret_cast<const BlockQ4_K*>(w + i * wrb) + b;
      std::memcpy(dst + 2 * i, &blk->d, 2);
      std::memcpy(dst + 16 + 2 * i, &blk->dmin, 2);
      for (int j = 0; j < 8; ++j) {
        int sc, m;
        detail::scale_min_k4(j, blk->scales, sc, m);
        dst[32 + pair_scale_at(j, i)] = static_cast<uint8_t>(sc);
        dst[96 + 16 * (j / 2) + 2 * i + j % 2] = static_cast<uint8_t>(m);
      }
      for (int p = 0; p < 4; ++p)
        for (int k = 0; k < 8; ++k) std::memcpy(dst + kQOffset + 256 * p + 32 * k + 4 * i, blk->qs + 32 * p + 4 * k, 4);
    }
  }
};

// One token: the reference Q8_K quantization (its q and d, bit for bit), then each sub-block
// pair's two sums (bsums[4p] + bsums[4p+1], bsums[4p+2] + bsums[4p+3]) as one int16 pair.
void prepare(const float* x, int64_t n, uint8_t* out) {
  BlockQ8_K q;
  for (int64_t b = 0; b < n / 256; ++b) {
    quantize_row(DType::Q8_K, x + 256 * b, &q, 256);
    uint8_t* dst = out + b * Q4_KFormat::kXBytes;
    std::memcpy(dst + kXD, &q.d, 4);
    std::memcpy(dst, q.qs, 256);
    for (int p = 0; p < 4; ++p) {
      const int16_t pair[2] = {static_cast<int16_t>(q.bsums[4 * p] + q.bsums[4 * p + 1]),
                               static_cast<int16_t>(q.bsums[4 * p + 2] + q.bsums[4 * p + 3])};
      std::memcpy(dst + kXSums + 4 * p, pair, 4);
    }
  }
}

// 8 rows × one token over nb super-blocks, in ggml's order: its AVX2 Q4_K dot product keeps 8
// lanes (lane k: elements 4k..4k+3 of every sub-block, weighted by the sub-block's scale) in
// int32 across a super-block, then one FMA per lane and super-block; the mins in 4 lanes (lane
// p: sub-blocks 2p and 2p+1) likewise; at the end hsum(8 lanes) + hsum(4 lanes). Chunk k of this
// layout is lane k of 8 rows, so the same chains come out per row. (Summing a sub-block's chunks
// in int16 first, one madd per sub-block, was ~30 % fewer instructions but moved a deepseek2
// Q4_K_M golden's teacher-forced logits past their mean tolerance.)
template <class Dot>
void lane_tile(const uint8_t* wg, int64_t nb, const uint8_t* x, size_t, float* y, int64_t, bool) {
  __m256 acc[8], accm[4];
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (auto& a : accm) a = _mm256_setzero_ps();
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* pb = wg + b * Q4_KFormat::kBlock;
#pragma GCC unroll 20
    for (size_t o = 0; o < Q4_KFormat::kBlock; o += 64)
      _mm_prefetch(reinterpret_cast<const char*>(pb + kStreamAhead + o), _MM_HINT_T0);
    const uint8_t* xb = x + b * Q4_KFormat::kXBytes;
    // (sc_j, sc_j) per row as int16 pairs, for each sub-block j.
    __m256i sc[8];
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) scale_pairs<false>(pb + 32 + 16 * p, sc[2 * p], sc[2 * p + 1]);
    float dx;
    std::memcpy(&dx, xb + kXD, 4);
    const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pb))),
                                   _mm256_set1_ps(dx));
    const __m256 dmin = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pb + 16))),
                                      _mm256_set1_ps(-dx));
    // Pair by pair, the 8 lanes' sums side by side: 8 independent chains of 8 products each, and
    // the weights read in memory order.
    __m256i isum[8];
    for (auto& v : isum) v = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + kQOffset + 256 * p + 32 * k));
        const __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
        isum[k] = Dot::add(isum[k], _mm256_maddubs_epi16(lo, bcast4(xb + 64 * p + 4 * k)), sc[2 * p]);
        isum[k] = Dot::add(isum[k], _mm256_maddubs_epi16(hi, bcast4(xb + 64 * p + 32 + 4 * k)), sc[2 * p + 1]);
      }
    }
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) acc[k] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum[k]), acc[k]);
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      const __m256i mins = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pb + 96 + 16 * p)));
      accm[p] = _mm256_fmadd_ps(dmin, _mm256_cvtepi32_ps(_mm256_madd_epi16(mins, bcast4(xb + kXSums + 4 * p))), accm[p]);
    }
  }
  const __m256 h8 = ggml_lane_sum(acc);
  const __m256 h4 = _mm256_add_ps(_mm256_add_ps(accm[0], accm[2]), _mm256_add_ps(accm[1], accm[3]));
  _mm256_storeu_ps(y, _mm256_add_ps(h8, h4));
}

template <class Dot>
constexpr GroupTileFn kTiles[1] = {lane_tile<Dot>};

// Prompts (PackedKernels::gemm_many): one exact integer per row and super-block, Σ_j sc_j·(q_j·x_j),
// the mins' integer beside it, and one FMA chain per row. Not ggml's rounding, so matmul leaves
// it out where a token's bits must not depend on its batch. Pairs::add<TB>(pb, p, xb, isum) adds
// sub-blocks 2p and 2p + 1 to each token's integers, the ISA's way (Int16Pairs below,
// x86_packed_k_vnni.h); being exact, every way gives the same bits.
template <class Dot, int TB, class Pairs>
void q4_k_many_tile(const uint8_t* wg, int64_t nb, const uint8_t* x, size_t xrb, float* y, int64_t ldy, bool) {
  __m256 acc[TB];
#pragma GCC unroll 8
  for (int t = 0; t < TB; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* pb = wg + b * Q4_KFormat::kBlock;
    const uint8_t* xb[TB];
    __m256i isum[TB];
#pragma GCC unroll 8
    for (int t = 0; t < TB; ++t) {
      xb[t] = x + t * xrb + b * Q4_KFormat::kXBytes;
      isum[t] = _mm256_setzero_si256();
    }
    for (int p = 0; p < 4; ++p) Pairs::template add<TB>(pb, p, xb, isum);
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pb)));
    const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pb + 16)));
#pragma GCC unroll 8
    for (int t = 0; t < TB; ++t) {
      __m256i msum = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int p = 0; p < 4; ++p) {
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pb + 96 + 16 * p)));
        msum = Dot::add(msum, mins, bcast4(xb[t] + kXSums + 4 * p));
      }
      float dx;
      std::memcpy(&dx, xb[t] + kXD, 4);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(d, _mm256_set1_ps(dx)), acc[t]);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(dmin, _mm256_set1_ps(-dx)), acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < TB; ++t) _mm256_storeu_ps(y + t * ldy, acc[t]);
}

// A sub-block's 8 chunks summed in int16 (maddubs pairs ≤ 3810, 8 of them ≤ 30480), then one
// madd by (sc, sc); up to 3 tokens share each unpacked chunk.
template <class Dot>
struct Int16Pairs {
  template <int TB>
  [[gnu::always_inline]] static void add(const uint8_t* pb, int p, const uint8_t* const* xb, __m256i* isum) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256i sa[TB], sb[TB];
#pragma GCC unroll 4
    for (int t = 0; t < TB; ++t) sa[t] = sb[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + kQOffset + 256 * p + 32 * k));
      const __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
#pragma GCC unroll 4
      for (int t = 0; t < TB; ++t) {
        sa[t] = _mm256_add_epi16(sa[t], _mm256_maddubs_epi16(lo, bcast4(xb[t] + 64 * p + 4 * k)));
        sb[t] = _mm256_add_epi16(sb[t], _mm256_maddubs_epi16(hi, bcast4(xb[t] + 64 * p + 32 + 4 * k)));
      }
    }
    __m256i sca, scb;
    scale_pairs<false>(pb + 32 + 16 * p, sca, scb);
#pragma GCC unroll 4
    for (int t = 0; t < TB; ++t) isum[t] = Dot::add(Dot::add(isum[t], sa[t], sca), sb[t], scb);
  }
};

struct Q4_KMany : Q4_KFormat {
  static constexpr int64_t kMaxTile = 3;
};
template <class Dot>
constexpr GroupTileFn kManyTiles[3] = {q4_k_many_tile<Dot, 1, Int16Pairs<Dot>>, q4_k_many_tile<Dot, 2, Int16Pairs<Dot>>,
                                       q4_k_many_tile<Dot, 3, Int16Pairs<Dot>>};


// Q6_K: 16 sub-blocks of 16 with int8 scales, q = (4 low bits | 2 high bits) − 32:
//   W·x = d·dx·Σ_s sc_s·(Σ q·x − 32·Σx)
// Per group of 8 rows and super-block the packed form is
//   uint16 d[8]; int8 sc[8][16]                          sub-block pairs as Q4_K's scales
//   per half h (128 elements) and chunk k (bytes 4k..4k+3 of each 32-byte run), row i's
//   4 bytes of ql[64h .. +31], of ql[64h + 32 .. +63] and of qh[32h .. +31]
// 16 + 128 + 2·8·96 = 1680 bytes, the 8 original blocks' size. From a chunk's three words come
// 4 runs of 4 weights (elements 128h + 32r + 4k .. +3, r = 0..3). A token is prepared as int8
// q[256], float d and, per half h, pair of runs (2j, 2j + 1) and chunk k, the runs' −32·Σx as
// an int16 pair: the −32 offsets of a lane join its sum as 2 products per pair of runs (one
// Dot::add against the two sub-blocks' scales) instead of a subtraction per run. Prompts, whose
// integer is one per row and super-block, take the offsets from the sub-blocks' sums instead:
// per half h, run pair j and chunk half c, (Σx of sub-block 8h + 4j + c, of 8h + 4j + 2 + c).
constexpr size_t kQ6Scales = 16, kQ6Q = 16 + 128;
constexpr size_t kQ6XD = 256, kQ6XBias = 260;  // bias: (h, j, k) at 4·(16h + 8j + k)
constexpr size_t kQ6XSums = kQ6XBias + 128;    // sub-block sums: (h, j, c) at 4·(4h + 2j + c)

struct Q6_KFormat {
  static constexpr int64_t kGroup = kRows, kElems = 256;
  static constexpr size_t kBlock = kQ6Q + 2 * 8 * 96, kXBytes = kQ6XSums + 32;
  static constexpr int64_t kSlab = int64_t{1} << 40;
  static constexpr int64_t kMaxTile = 1;
  static void pack_block(const uint8_t* w, size_t wrb, int64_t b, uint8_t* dst) {
    for (int64_t i = 0; i < kRows; ++i) {
      const auto* blk = reinterpret_cast<const BlockQ6_K*>(w + i * wrb) + b;
      std::memcpy(dst + 2 * i, &blk->d, 2);
      for (int s = 0; s < 16; ++s) dst[kQ6Scales + pair_scale_at(s, i)] = static_cast<uint8_t>(blk->scales[s]);
      for (int h = 0; h < 2; ++h)
        for (int k = 0; k < 8; ++k) {
          uint8_t* c = dst + kQ6Q + 96 * (8 * h + k) + 4 * i;
          std::memcpy(c, blk->ql + 64 * h + 4 * k, 4);
          std::memcpy(c + 32, blk->ql + 64 * h + 32 + 4 * k, 4);
          std::memcpy(c + 64, blk->qh + 32 * h + 4 * k, 4);
        }
    }
  }
};

void prepare_q6_k(const float* x, int64_t n, uint8_t* out) {
  BlockQ8_K q;
  for (int64_t b = 0; b < n / 256; ++b) {
    quantize_row(DType::Q8_K, x + 256 * b, &q, 256);
    uint8_t* dst = out + b * Q6_KFormat::kXBytes;
    std::memcpy(dst, q.qs, 256);
    std::memcpy(dst + kQ6XD, &q.d, 4);
    auto run_sum = [&](int e) { return q.qs[e] + q.qs[e + 1] + q.qs[e + 2] + q.qs[e + 3]; };
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 2; ++j)
        for (int k = 0; k < 8; ++k) {
          const int e = 128 * h + 64 * j + 4 * k;  // run 2j's 4 elements; run 2j + 1's 32 on
          const int16_t pair[2] = {static_cast<int16_t>(-32 * run_sum(e)), static_cast<int16_t>(-32 * run_sum(e + 32))};
          std::memcpy(dst + kQ6XBias + 4 * (16 * h + 8 * j + k), pair, 4);
        }
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 2; ++j)
        for (int c = 0; c < 2; ++c) {
          const int16_t pair[2] = {q.bsums[8 * h + 4 * j + c], q.bsums[8 * h + 4 * j + 2 + c]};
          std::memcpy(dst + kQ6XSums + 4 * (4 * h + 2 * j + c), pair, 4);
        }
  }
}

// (sc, sc) per row as int16 pairs for the 8 sub-blocks of half h (runs r = 0..3, their first
// or second 16 elements: sub-block 8h + 2r + k/4 for chunk k).
[[gnu::always_inline]] inline void q6_scales(const uint8_t* pb, int h, __m256i sc[8]) {
#pragma GCC unroll 4
  for (int s = 0; s < 8; s += 2) scale_pairs<true>(pb + kQ6Scales + 64 * h + 8 * s, sc[s], sc[s + 1]);
}

// (sc_a, sc_b) int16 pairs for the −32 offsets of runs 2j and 2j + 1 of half h: for chunks 0..3
// (sub-blocks 2r) in pairs[2j], for chunks 4..7 (sub-blocks 2r + 1) in pairs[2j + 1].
[[gnu::always_inline]] inline void q6_bias_scales(const __m256i sc[8], __m256i pairs[4]) {
#pragma GCC unroll 2
  for (int j = 0; j < 2; ++j) {
    pairs[2 * j] = _mm256_blend_epi16(sc[4 * j], sc[4 * j + 2], 0xAA);
    pairs[2 * j + 1] = _mm256_blend_epi16(sc[4 * j + 1], sc[4 * j + 3], 0xAA);
  }
}

// Σ_s sc_s·Σx_s over half h's 8 sub-blocks for one token (prompt tiles; the caller multiplies by
// −32): |sc| ≤ 128, |Σx| ≤ 16·127, exact in int32.
template <class Dot>
[[gnu::always_inline]] inline __m256i q6_sub_block_sums(const __m256i bias_sc[4], const uint8_t* xb, int h) {
  __m256i m = _mm256_setzero_si256();
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) m = Dot::add(m, bias_sc[i], bcast4(xb + kQ6XSums + 4 * (4 * h + i)));
  return m;
}

// A chunk's three words of 8 rows as 4 runs of unsigned 6-bit weights (elements 32r + 4k ..).
[[gnu::always_inline]] inline void q6_unpack(const uint8_t* c, __m256i q[4]) {
  const __m256i low4 = _mm256_set1_epi8(0x0F), bits45 = _mm256_set1_epi8(0x30);
  const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c));
  const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + 32));
  const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + 64));
  // Each byte's 2-bit field moved to bits 4..5 by one 16-bit shift and a mask: what the shift
  // brings in from the neighbouring byte lands outside the mask.
  q[0] = _mm256_or_si256(_mm256_and_si256(l0, low4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), bits45));
  q[1] = _mm256_or_si256(_mm256_and_si256(l1, low4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), bits45));
  q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), _mm256_and_si256(hb, bits45));
  q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4), _mm256_and_si256(_mm256_srli_epi16(hb, 2), bits45));
}

// 8 rows × one token over nb super-blocks in ggml's order (see the file comment): per lane k,
// Σ over the 8 runs of sc·maddubs(q, x) and over their pairs the −32 offsets, exact in int32, one
// FMA per super-block.
template <class Dot>
void q6_k_tile(const uint8_t* wg, int64_t nb, const uint8_t* x, size_t, float* y, int64_t, bool) {
  __m256 acc[8];
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* pb = wg + b * Q6_KFormat::kBlock;
#pragma GCC unroll 27
    for (size_t o = 0; o < Q6_KFormat::kBlock; o += 64)
      _mm_prefetch(reinterpret_cast<const char*>(pb + kStreamAhead + o), _MM_HINT_T0);
    const uint8_t* xb = x + b * Q6_KFormat::kXBytes;
    float dx;
    std::memcpy(&dx, xb + kQ6XD, 4);
    const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pb))),
                                   _mm256_set1_ps(dx));
    __m256i isum[8];
    for (auto& v : isum) v = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      __m256i sc[8], bias_sc[4];
      q6_scales(pb, h, sc);
      q6_bias_scales(sc, bias_sc);
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        __m256i q[4];
        q6_unpack(pb + kQ6Q + 96 * (8 * h + k), q);
#pragma GCC unroll 2
        for (int j = 0; j < 2; ++j)
          isum[k] = Dot::add(isum[k], bias_sc[2 * j + k / 4], bcast4(xb + kQ6XBias + 4 * (16 * h + 8 * j + k)));
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {
          const int e = 128 * h + 32 * r + 4 * k;  // first of the 4 elements
          isum[k] = Dot::add(isum[k], _mm256_maddubs_epi16(q[r], bcast4(xb + e)), sc[2 * r + k / 4]);
        }
      }
    }
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) acc[k] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum[k]), acc[k]);
  }
  _mm256_storeu_ps(y, ggml_lane_sum(acc));
}

template <class Dot>
constexpr GroupTileFn kQ6Tiles[1] = {q6_k_tile<Dot>};

// Q6_K prompts (gemm_many): the same integers, all lanes of a super-block in one int32 sum per
// row and one FMA (the −32 offsets from the sub-blocks' sums), up to 4 tokens sharing each
// unpacked chunk. Not ggml's rounding (see
// many_tile), so matmul leaves it out where bits must not depend on the batch.
template <class Dot, int TB>
void q6_k_many_tile(const uint8_t* wg, int64_t nb, const uint8_t* x, size_t xrb, float* y, int64_t ldy, bool) {
  __m256 acc[TB];
#pragma GCC unroll 4
  for (int t = 0; t < TB; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* pb = wg + b * Q6_KFormat::kBlock;
    const uint8_t* xb[TB];
    __m256i isum[TB];
#pragma GCC unroll 4
    for (int t = 0; t < TB; ++t) {
      xb[t] = x + t * xrb + b * Q6_KFormat::kXBytes;
      isum[t] = _mm256_setzero_si256();
    }
    for (int h = 0; h < 2; ++h) {
      __m256i sc[8], bias_sc[4];
      q6_scales(pb, h, sc);
      q6_bias_scales(sc, bias_sc);
      for (int k = 0; k < 8; ++k) {
        __m256i q[4];
        q6_unpack(pb + kQ6Q + 96 * (8 * h + k), q);
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {
          const int e = 128 * h + 32 * r + 4 * k;
#pragma GCC unroll 4
          for (int t = 0; t < TB; ++t) isum[t] = Dot::add(isum[t], _mm256_maddubs_epi16(q[r], bcast4(xb[t] + e)), sc[2 * r + k / 4]);
        }
      }
#pragma GCC unroll 4
      for (int t = 0; t < TB; ++t)
        isum[t] = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(q6_sub_block_sums<Dot>(bias_sc, xb[t], h), 5));
    }
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pb)));
#pragma GCC unroll 4
    for (int t = 0; t < TB; ++t) {
      float dx;
      std::memcpy(&dx, xb[t] + kQ6XD, 4);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(d, _mm256_set1_ps(dx)), acc[t]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < TB; ++t) _mm256_storeu_ps(y + t * ldy, acc[t]);
}

struct Q6_KMany : Q6_KFormat {
  static constexpr int64_t kMaxTile = 4;
};
template <class Dot>
constexpr GroupTileFn kQ6ManyTiles[4] = {q6_k_many_tile<Dot, 1>, q6_k_many_tile<Dot, 2>, q6_k_many_tile<Dot, 3>,
                                         q6_k_many_tile<Dot, 4>};

template <class Dot>
constexpr PackedKernels kQ6_K{kRows,
                              0,  // no slabs
                              pack_bytes<Q6_KFormat>,
                              pack<Q6_KFormat>,
                              prep_bytes<Q6_KFormat>,
                              prepare_q6_k,
                              packed_gemm<Q6_KFormat, kQ6Tiles<Dot>>,
                              /*one_token=*/true,
                              /*min_cols=*/0,
                              /*gemm_many=*/packed_gemm<Q6_KMany, kQ6ManyTiles<Dot>>};

template <class Dot>
constexpr PackedKernels kQ4_K{kRows,
                              0,  // no slabs
                              pack_bytes<Q4_KFormat>,
                              pack<Q4_KFormat>,
                              prep_bytes<Q4_KFormat>,
                              prepare,
                              packed_gemm<Q4_KFormat, kTiles<Dot>>,
                              /*one_token=*/true,
                              /*min_cols=*/0,
                              /*gemm_many=*/packed_gemm<Q4_KMany, kManyTiles<Dot>>};
