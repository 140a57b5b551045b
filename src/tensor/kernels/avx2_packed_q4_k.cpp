// Q4_K × one or many tokens on AVX2 over weights repacked at load time, 8 rows in the 8 int32
// lanes as avx2_packed.cpp does for Q4_0 (see there for the plan), per super-block of 256.
//
// A Q4_K super-block is 8 sub-blocks of 32 with 6-bit scales sc_j and mins m_j:
//   W·x = d·dx·Σ_j sc_j·(q_j · x_j) − dmin·dx·Σ_j m_j·Σx_j        (q nibbles 0..15)
// Per group of 8 rows and super-block the packed form is
//   uint16 d[8], dmin[8]     the rows' scales
//   uint8  sc[8][8]          sub-block j, row i (the 6-bit scales unpacked once, at load)
//   uint8  m[4][8][2]        sub-block pair p, row i: m_2p, m_2p+1 (ready for one madd)
//   uint8  q[4][8][8][4]     pair p, chunk k, row i: bytes qs[32p + 4k .. +3] of row i (low
//                            nibbles: sub-block 2p, elements 4k..4k+3; high: sub-block 2p+1)
// 1184 bytes for 8 original blocks of 1152 (+2.8 %, the unpacked scales and mins). A token is
// prepared as int8 q[256], float d and, per sub-block pair, its two sums Σx as int16 pairs.
//
// Products: maddubs of nibbles (≤ 15) and activations (|x| ≤ 127), pair sums ≤ 3810, then one
// madd by (sc, sc) per chunk: exact int32. The float steps are ggml's (see lane_tile).
#if defined(__x86_64__)
#include <algorithm>
#include <cstring>

#include "tensor/kernels/kernels.h"
#include "tensor/quant.h"
#include "tensor/quant_blocks.h"

#include "tensor/kernels/avx2_target_begin.h"

namespace orchard::kernels {
namespace {

using detail::BlockQ4_K;
using detail::BlockQ8_K;

#include "tensor/kernels/packed_rows.h"

constexpr int64_t kRows = 8;
constexpr size_t kQOffset = 32 + 64 + 64;
constexpr size_t kXQ = 256, kXD = 256, kXSums = 260;  // offsets in a prepared block

[[gnu::always_inline]] inline __m256i bcast4(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// Q4_K's 6-bit scale and min of sub-block j (0..7), packed into 12 bytes.
void scale_min(const uint8_t* s, int j, uint8_t& sc, uint8_t& m) {
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = static_cast<uint8_t>((s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4));
    m = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
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
        uint8_t sc, m;
        scale_min(blk->scales, j, sc, m);
        dst[32 + 8 * j + i] = sc;
        dst[96 + 16 * (j / 2) + 2 * i + j % 2] = m;
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
    std::memcpy(dst + kXQ, &q.d, 4);
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
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(pb + 32 + 8 * j)));
      sc[j] = _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
    }
    float dx;
    std::memcpy(&dx, xb + kXD, 4);
    const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pb))),
                                   _mm256_set1_ps(dx));
    const __m256 dmin = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pb + 16))),
                                      _mm256_set1_ps(-dx));
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int p = 0; p < 4; ++p) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + kQOffset + 256 * p + 32 * k));
        const __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(lo, bcast4(xb + 64 * p + 4 * k)), sc[2 * p]));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(hi, bcast4(xb + 64 * p + 32 + 4 * k)), sc[2 * p + 1]));
      }
      acc[k] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), acc[k]);
    }
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      const __m256i mins = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pb + 96 + 16 * p)));
      accm[p] = _mm256_fmadd_ps(dmin, _mm256_cvtepi32_ps(_mm256_madd_epi16(mins, bcast4(xb + kXSums + 4 * p))), accm[p]);
    }
  }
  const __m256 h8 = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[4]), _mm256_add_ps(acc[2], acc[6])),
                                  _mm256_add_ps(_mm256_add_ps(acc[1], acc[5]), _mm256_add_ps(acc[3], acc[7])));
  const __m256 h4 = _mm256_add_ps(_mm256_add_ps(accm[0], accm[2]), _mm256_add_ps(accm[1], accm[3]));
  _mm256_storeu_ps(y, _mm256_add_ps(h8, h4));
}

constexpr GroupTileFn kTiles[1] = {lane_tile};

constexpr PackedKernels kQ4_K{kRows,
                              0,  // no slabs
                              pack_bytes<Q4_KFormat>,
                              pack<Q4_KFormat>,
                              prep_bytes<Q4_KFormat>,
                              prepare,
                              packed_gemm<Q4_KFormat, kTiles>,
                              /*one_token=*/true};

}  // namespace

const PackedKernels* avx2_packed_k(DType w) { return w == DType::Q4_K ? &kQ4_K : nullptr; }

}  // namespace orchard::kernels

#include "tensor/kernels/avx2_target_end.h"
#endif  // __x86_64__
