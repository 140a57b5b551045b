// Q4_0 weights on AVX-512 VNNI, two blocks per 512-bit operation, for one token (generation)
// and for tiles of rows × tokens (prompt processing).
//
// Each token's activations are quantized to Q8_0 exactly as the reference does, then laid out
// for this kernel, per pair of blocks (A, B):
//   int8  q[64]     A0..15, B0..15, A16..31, B16..31 — the order the weight nibbles unpack to
//   int32 c[16]     −8·(sum of the 4 activations of that lane): dpbusd starts from it, so it
//                   yields Σ(w_nibble − 8)·x per lane, the Q4_0 offset folded in for free
//   float d[2]      dA, dB
// then W[r]·x = Σ_pairs Σ_lanes lane·dw·dx, with dw·dx spread to the lanes of its block.
#if defined(__x86_64__)
#include <cstring>
#include <vector>
#include "tensor/f16.h"
#include "tensor/kernels/kernels.h"
#include "tensor/quant.h"
#include "tensor/quant_blocks.h"

#include "tensor/kernels/avx512_target_begin.h"

#include "tensor/kernels/x86_q8_quantize.h"

namespace orchard::kernels {
namespace {

using detail::BlockQ4_0;
using detail::BlockQ8_0;

constexpr size_t kPairBytes = 64 + 64 + 8;

size_t prep_bytes(int64_t n) { return static_cast<size_t>((n / 32 + 1) / 2) * kPairBytes; }

void prepare(const float* x, int64_t n, uint8_t* out) {
  const int64_t nb = n / 32;
  const __m512i eights = _mm512_set1_epi8(8);
  for (int64_t p = 0; p < (nb + 1) / 2; ++p) {
    uint8_t* dst = out + p * kPairBytes;
    float d[2] = {0.0f, 0.0f};
    const __m256i qa = x86::quantize_block_q8_0(x + 64 * p, d[0]);
    const __m256i qb = 2 * p + 1 < nb ? x86::quantize_block_q8_0(x + 64 * p + 32, d[1]) : _mm256_setzero_si256();
    // A0..15, B0..15, A16..31, B16..31
    const __m256i lo = _mm256_permute2x128_si256(qa, qb, 0x20);
    const __m256i hi = _mm256_permute2x128_si256(qa, qb, 0x31);
    const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    _mm512_storeu_si512(dst, q);
    const __m512i c = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), eights, q));
    _mm512_storeu_si512(dst + 64, c);
    std::memcpy(dst + 128, d, sizeof d);
  }
}

// dA in the lanes of block A (0-3, 8-11), dB in those of block B (4-7, 12-15).
inline __m512 spread(__m128 pair) {
  const __m512i pick = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1);
  return _mm512_permutexvar_ps(pick, _mm512_castps128_ps512(pair));
}

inline __m512i unpack_pair(const BlockQ4_0* w) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i v = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(w[1].qs),
                                        reinterpret_cast<const __m128i*>(w[0].qs));
  const __m256i lo = _mm256_and_si256(v, low4);
  const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// A lone last block must not read past its own bytes: its partner's lanes are zero.
inline __m512i unpack_lone(const BlockQ4_0* w) {
  const __m128i low4 = _mm_set1_epi8(0x0F);
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[0].qs));
  const __m256i lo = _mm256_zextsi128_si256(_mm_and_si128(v, low4));
  const __m256i hi = _mm256_zextsi128_si256(_mm_and_si128(_mm_srli_epi16(v, 4), low4));
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

inline __m128 weight_scales(const BlockQ4_0* w, bool lone) {
  const __m128i h = _mm_insert_epi16(_mm_cvtsi32_si128(w[0].d), lone ? 0 : w[1].d, 1);
  return _mm_cvtph_ps(h);
}

template <int RB, int TB>
void tile(const uint8_t* w, size_t wrb, const uint8_t* x, size_t xrb, int64_t nb, float* y, int64_t ldy) {
  __m512 acc[RB][TB];
#pragma GCC unroll 8
  for (int r = 0; r < RB; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < TB; ++t) acc[r][t] = _mm512_setzero_ps();
  const int64_t pairs = (nb + 1) / 2;
  for (int64_t p = 0; p < pairs; ++p) {
    const bool lone = 2 * p + 1 == nb;
    __m512i xq[TB];
    __m512 dx[TB];
#pragma GCC unroll 8
    for (int t = 0; t < TB; ++t) {
      const uint8_t* xp = x + t * xrb + p * kPairBytes;
      xq[t] = _mm512_loadu_si512(xp);
      dx[t] = spread(_mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(xp + 128))));
    }
#pragma GCC unroll 8
    for (int r = 0; r < RB; ++r) {
      const auto* wb = reinterpret_cast<const BlockQ4_0*>(w + r * wrb) + 2 * p;
      const __m512i wq = lone ? unpack_lone(wb) : unpack_pair(wb);
      const __m512 dw = spread(weight_scales(wb, lone));
#pragma GCC unroll 8
      for (int t = 0; t < TB; ++t) {
        const __m512i c = _mm512_loadu_si512(x + t * xrb + p * kPairBytes + 64);
        const __m512i s = _mm512_dpbusd_epi32(c, wq, xq[t]);
        acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, dx[t]), acc[r][t]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < RB; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < TB; ++t) y[t * ldy + r] = _mm512_reduce_add_ps(acc[r][t]);
}

struct Tile {
  template <int RB, int TB>
  static void run(const uint8_t* w, size_t wrb, const uint8_t* x, size_t xrb, int64_t nb, float* y, int64_t ldy) {
    tile<RB, TB>(w, wrb, x, xrb, nb, y, ldy);
  }
};

#include "tensor/kernels/avx512_pair_driver.h"

}  // namespace

void add_avx512_prepared(DType w, Kernels& k) {
  if (w == DType::Q4_0) {
    k.prep_bytes = prep_bytes;
    k.prepare = prepare;
    k.gemv = pair_gemv<Tile>;
    k.gemm_prepared = pair_gemm_prepared<Tile>;
  }
  if (w == DType::Q8_0) add_avx512_prepared_q8_0(k);
}

}  // namespace orchard::kernels

#include "tensor/kernels/avx512_target_end.h"
#endif  // __x86_64__
