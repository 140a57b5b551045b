// Q8_0 weights on AVX-512 VNNI, two blocks per 512-bit operation, for one token (generation)
// and for tiles of rows × tokens (prompt processing without the repacked copy).
//
// The AVX2-style tiles spend a 256-bit op and two scalar scale conversions per 34-byte block,
// which made one thread compute-bound below the memory stream. Here each token's activations
// are quantized to Q8_0 exactly as the reference does and stored per pair of blocks (A, B) as
//   uint8 q[64]   x + 128 (A0..31 then B0..31): dpbusd wants its first operand unsigned
//   float d[2]    dA, dB
// and per pair of weight blocks  Σ x·w = Σ (x+128)·w − 128·Σ w: the second sum is one more
// dpbusd (against ones) per weight pair, shared by every token of a tile, and becomes the start
// value of the token's dpbusd.
#if defined(__x86_64__)
#include <cstring>

#include "tensor/kernels/kernels.h"
#include "tensor/quant_blocks.h"

// Standard headers come first: clang rejects a target attribute pushed over their definitions.
#include "tensor/kernels/avx512_target_begin.h"

#include "tensor/kernels/x86_q8_quantize.h"

namespace orchard::kernels {
namespace {

using detail::BlockQ8_0;

constexpr size_t kPairBytes = 64 + 8;

size_t prep_bytes(int64_t n) { return static_cast<size_t>((n / 32 + 1) / 2) * kPairBytes; }

void prepare(const float* x, int64_t n, uint8_t* out) {
  const int64_t nb = n / 32;
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int64_t p = 0; p < (nb + 1) / 2; ++p) {
    uint8_t* dst = out + p * kPairBytes;
    float d[2] = {0.0f, 0.0f};
    const __m256i qa = _mm256_xor_si256(x86::quantize_block_q8_0(x + 64 * p, d[0]), bias);
    // A lone last block's partner lanes are 0 (not 128), so they add nothing.
    const __m256i qb = 2 * p + 1 < nb ? _mm256_xor_si256(x86::quantize_block_q8_0(x + 64 * p + 32, d[1]), bias)
                                      : _mm256_setzero_si256();
    _mm512_storeu_si512(dst, _mm512_inserti64x4(_mm512_castsi256_si512(qa), qb, 1));
    std::memcpy(dst + 64, d, sizeof d);
  }
}

// dA in the lanes of block A (0-7), dB in those of block B (8-15).
inline __m512 spread(__m128 pair) {
  const __m512i pick = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  return _mm512_permutexvar_ps(pick, _mm512_castps128_ps512(pair));
}

// A lone last block must not read past its own bytes: its partner's lanes are zero.
inline __m512i load_pair(const BlockQ8_0* w, bool lone) {
  const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[0].qs));
  const __m256i b = lone ? _mm256_setzero_si256() : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[1].qs));
  return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
}

inline __m128 weight_scales(const BlockQ8_0* w, bool lone) {
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
  const __m512i ones = _mm512_set1_epi8(1);
  const int64_t pairs = (nb + 1) / 2;
  for (int64_t p = 0; p < pairs; ++p) {
    const bool lone = 2 * p + 1 == nb;
    __m512i xq[TB];
    __m512 dx[TB];
#pragma GCC unroll 8
    for (int t = 0; t < TB; ++t) {
      const uint8_t* xp = x + t * xrb + p * kPairBytes;
      xq[t] = _mm512_loadu_si512(xp);
      dx[t] = spread(_mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(xp + 64))));
    }
#pragma GCC unroll 8
    for (int r = 0; r < RB; ++r) {
      const auto* wb = reinterpret_cast<const BlockQ8_0*>(w + r * wrb) + 2 * p;
      if constexpr (RB == 1 && TB == 1) {  // one token streams the weights: see f16_gemv_fast
        _mm_prefetch(reinterpret_cast<const char*>(wb) + kStreamAhead, _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(wb) + kStreamAhead + 64, _MM_HINT_T0);
      }
      const __m512i wq = load_pair(wb, lone);
      // −128·Σw per lane: the start value that takes the activations' +128 back out.
      const __m512i start =
          _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, wq), 7));
      const __m512 dw = spread(weight_scales(wb, lone));
#pragma GCC unroll 8
      for (int t = 0; t < TB; ++t) {
        const __m512i s = _mm512_dpbusd_epi32(start, xq[t], wq);
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

void add_avx512_prepared_q8_0(Kernels& k) {
  k.prep_bytes = prep_bytes;
  k.prepare = prepare;
  k.gemv = pair_gemv<Tile>;
  k.gemm_prepared = pair_gemm_prepared<Tile>;
}

}  // namespace orchard::kernels

#include "tensor/kernels/avx512_target_end.h"
#endif  // __x86_64__
