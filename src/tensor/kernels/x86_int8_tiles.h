#pragma once
// Integer-dot micro-kernels shared by the AVX2 and AVX-512 files. Each includes this header
// after switching on its own target ISA and supplies `Ops::dot(u, s)`: for 32 unsigned bytes u
// and 32 signed bytes s, eight int32 lanes, lane i = Σ_{k=4i..4i+3} u_k·s_k (maddubs + madd on
// AVX2, one dpbusd with VNNI). Weight formats reduce to that product:
//   Q4_0: Σ(q−8)·x = dot(q, x) − dot(8, x)        (q ∈ [0,15] unsigned nibbles)
//   Q5_0: Σ(q−16)·x = dot(q, x) − dot(16, x)    (q ∈ [0,31]: nibble | 5th bit << 4)
//   Q8_0: Σ w·x   = dot(|w|, sign(x, w))
//   Q4_K: Σ_j sc_j·dot(q_j, x_j)·d − Σ_j m_j·Σx_j·dmin   (Σx_j from Q8_K's bsums)
//   Q6_K: Σ_s sc_s·(dot(q_s, x_s) − 32·Σx_s)·d      (q ∈ [0,63])
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "tensor/quant_blocks.h"

namespace orchard::kernels::x86 {
// Internal linkage on purpose: every kernel file compiles these helpers for its own target ISA,
// and one shared (ODR-merged) copy could run AVX-512 code on an AVX2-only CPU.
namespace {

using detail::BlockQ4_0;
using detail::BlockQ4_K;
using detail::BlockQ5_K;
using detail::BlockQ5_0;
using detail::BlockQ6_K;
using detail::BlockQ8_0;
using detail::BlockQ8_K;

inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float f16(uint16_t h) { return _cvtsh_ss(h); }

inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Byte i of the result is 0x10 where bit i of the 32 bits at `p` is set, else 0.
inline __m256i fifth_bits(const uint8_t* p) {
  uint32_t bits;
  __builtin_memcpy(&bits, p, 4);
  // Byte i takes byte i/8 of the bits, then keeps its own bit (i mod 8).
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                                             _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202,
                                                                0x0303030303030303));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(0x10));
}

// The unsigned weights of a Q4_0 or Q5_0 block (elements 0..31 in order) and the offset the
// format subtracts from them.
struct Q4_0Weights {
  using Block = BlockQ4_0;
  static constexpr char kOffset = 8;
  static __m256i unpack(const BlockQ4_0* wb) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb->qs));
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
  }
};
// Q5_0 is Q4_0 with each weight's fifth bit from qh.
struct Q5_0Weights {
  using Block = BlockQ5_0;
  static constexpr char kOffset = 16;
  static __m256i unpack(const BlockQ5_0* wb) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb->qs));
    const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
    return _mm256_or_si256(nib, fifth_bits(wb->qh));
  }
};

// Q4_0 and Q5_0: Σ(q − offset)·x = dot(q, x) − dot(offset, x), the same lanes and float steps as
// ggml's AVX2 dot products (its weights q − offset signed, here q unsigned and the offset taken
// out per lane).
template <class Ops, class W, int RB, int TB>
struct OffsetTile {
  static void run(const uint8_t* w, size_t wrb, const uint8_t* x, size_t xrb, int64_t nb, float* y,
                  int64_t ldy) {
    __m256 acc[RB][TB];
    #pragma GCC unroll 8
    for (int r = 0; r < RB; ++r)
      #pragma GCC unroll 8
      for (int t = 0; t < TB; ++t) acc[r][t] = _mm256_setzero_ps();
    const __m256i offset = _mm256_set1_epi8(W::kOffset);
    for (int64_t b = 0; b < nb; ++b) {
      __m256i xq[TB], xs[TB];
      float dx[TB];
      #pragma GCC unroll 8
      for (int t = 0; t < TB; ++t) {
        const auto* xb = reinterpret_cast<const BlockQ8_0*>(x + t * xrb) + b;
        xq[t] = load32(xb->qs);
        xs[t] = Ops::dot(offset, xq[t]);
        dx[t] = f16(xb->d);
      }
      #pragma GCC unroll 8
      for (int r = 0; r < RB; ++r) {
        const auto* wb = reinterpret_cast<const typename W::Block*>(w + r * wrb) + b;
        const __m256i wq = W::unpack(wb);
        const float dw = f16(wb->d);
        #pragma GCC unroll 8
        for (int t = 0; t < TB; ++t) {
          const __m256i s = _mm256_sub_epi32(Ops::dot(wq, xq[t]), xs[t]);
          acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * dx[t]), acc[r][t]);
        }
      }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < RB; ++r)
      #pragma GCC unroll 8
      for (int t = 0; t < TB; ++t) y[t * ldy + r] = hsum256(acc[r][t]);
  }
};
template <class Ops, int RB, int TB> using Q4_0Tile = OffsetTile<Ops, Q4_0Weights, RB, TB>;
template <class Ops, int RB, int TB> using Q5_0Tile = OffsetTile<Ops, Q5_0Weights, RB, TB>;

template <class Ops, int RB, int TB>
struct Q8_0Tile {
  static void run(const uint8_t* w, size_t wrb, const uint8_t* x, size_t xrb, int64_t nb, float* y,
                  int64_t ldy) {
    __m256 acc[RB][TB];
    #pragma GCC unroll 8
    for (int r = 0; r < RB; ++r)
      #pragma GCC unroll 8
      for (int t = 0; t < TB; ++t) acc[r][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      __m256i xq[TB];
      float dx[TB];
      #pragma GCC unroll 8
      for (int t = 0; t < TB; ++t) {
        const auto* xb = reinterpret_cast<const BlockQ8_0*>(x + t * xrb) + b;
        xq[t] = load32(xb->qs);
        dx[t] = f16(xb->d);
      }
      #pragma GCC unroll 8
      for (int r = 0; r < RB; ++r) {
        const auto* wb = reinterpret_cast<const BlockQ8_0*>(w + r * wrb) + b;
        const __m256i wq = load32(wb->qs);
        const __m256i wa = _mm256_sign_epi8(wq, wq);
        const float dw = f16(wb->d);
        #pragma GCC unroll 8
        for (int t = 0; t < TB; ++t) {
          const __m256i s = Ops::dot(wa, _mm256_sign_epi8(xq[t], wq));
          acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * dx[t]), acc[r][t]);
        }
      }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < RB; ++r)
      #pragma GCC unroll 8
      for (int t = 0; t < TB; ++t) y[t * ldy + r] = hsum256(acc[r][t]);
  }
};

// Q4_K and Q5_K share everything but their levels: q[j] = sub-block j's 32 unsigned levels.
struct Q4_KLevels {
  using Block = BlockQ4_K;
  static void unpack(const BlockQ4_K* wb, __m256i q[8]) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    #pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m256i bytes = load32(wb->qs + 32 * j);
      q[2 * j] = _mm256_and_si256(bytes, low4);
      q[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low4);
    }
  }
};
// Q5_K: bit 2j of qh[l] is the fifth bit of sub-block 2j's element l, bit 2j+1 of 2j+1's. A
// 16-bit shift then a per-byte mask of 1 takes bit s of every byte.
struct Q5_KLevels {
  using Block = BlockQ5_K;
  static void unpack(const BlockQ5_K* wb, __m256i q[8]) {
    const __m256i low4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    const __m256i h = load32(wb->qh);
    #pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m256i bytes = load32(wb->qs + 32 * j);
      const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2 * j), one), 4);
      const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2 * j + 1), one), 4);
      q[2 * j] = _mm256_or_si256(_mm256_and_si256(bytes, low4), h0);
      q[2 * j + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bytes, 4), low4), h1);
    }
  }
};

template <class Ops, class Levels, int RB, int TB>
struct K4Tile {
  static void run(const uint8_t* w, size_t wrb, const uint8_t* x, size_t xrb, int64_t nb, float* y,
                  int64_t ldy) {
    __m256 acc[RB][TB];
    float mins[RB][TB] = {};
    #pragma GCC unroll 8
    for (int r = 0; r < RB; ++r)
      #pragma GCC unroll 8
      for (int t = 0; t < TB; ++t) acc[r][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      #pragma GCC unroll 8
      for (int r = 0; r < RB; ++r) {
        const auto* wb = reinterpret_cast<const typename Levels::Block*>(w + r * wrb) + b;
        __m256i q[8];
        int sc[8], m[8];
        Levels::unpack(wb, q);
        #pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) detail::scale_min_k4(j, wb->scales, sc[j], m[j]);
        const float d = f16(wb->d), dmin = f16(wb->dmin);
        #pragma GCC unroll 8
        for (int t = 0; t < TB; ++t) {
          const auto* xb = reinterpret_cast<const BlockQ8_K*>(x + t * xrb) + b;
          __m256i isum = _mm256_setzero_si256();
          int msum = 0;
          #pragma GCC unroll 8
          for (int j = 0; j < 8; ++j) {
            isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(Ops::dot(q[j], load32(xb->qs + 32 * j)),
                                                             _mm256_set1_epi32(sc[j])));
            msum += m[j] * (xb->bsums[2 * j] + xb->bsums[2 * j + 1]);
          }
          acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d * xb->d), acc[r][t]);
          mins[r][t] += dmin * xb->d * static_cast<float>(msum);
        }
      }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < RB; ++r)
      #pragma GCC unroll 8
      for (int t = 0; t < TB; ++t) y[t * ldy + r] = hsum256(acc[r][t]) - mins[r][t];
  }
};

template <class Ops, int RB, int TB> using Q4_KTile = K4Tile<Ops, Q4_KLevels, RB, TB>;
template <class Ops, int RB, int TB> using Q5_KTile = K4Tile<Ops, Q5_KLevels, RB, TB>;

template <class Ops, int RB, int TB>
struct Q6_KTile {
  static void run(const uint8_t* w, size_t wrb, const uint8_t* x, size_t xrb, int64_t nb, float* y,
                  int64_t ldy) {
    float acc[RB][TB] = {};
    const __m256i low4 = _mm256_set1_epi8(0x0F), three = _mm256_set1_epi8(3);
    for (int64_t b = 0; b < nb; ++b) {
      #pragma GCC unroll 8
      for (int r = 0; r < RB; ++r) {
        const auto* wb = reinterpret_cast<const BlockQ6_K*>(w + r * wrb) + b;
        // q[k] holds elements 32k … 32k+31 as unsigned 6-bit values.
        __m256i q[8];
        #pragma GCC unroll 8
        for (int n = 0; n < 2; ++n) {
          const __m256i l0 = load32(wb->ql + 64 * n), l1 = load32(wb->ql + 64 * n + 32);
          const __m256i h = load32(wb->qh + 32 * n);
          auto hi = [&](int shift) {
            return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, shift), three), 4);
          };
          q[4 * n + 0] = _mm256_or_si256(_mm256_and_si256(l0, low4), hi(0));
          q[4 * n + 1] = _mm256_or_si256(_mm256_and_si256(l1, low4), hi(2));
          q[4 * n + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), hi(4));
          q[4 * n + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4), hi(6));
        }
        // Lanes 0-3 of a dot cover sub-block 2k, lanes 4-7 sub-block 2k+1.
        __m256i scale[8];
        #pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
          const int s0 = wb->scales[2 * k], s1 = wb->scales[2 * k + 1];
          scale[k] = _mm256_setr_epi32(s0, s0, s0, s0, s1, s1, s1, s1);
        }
        const float d = f16(wb->d);
        #pragma GCC unroll 8
        for (int t = 0; t < TB; ++t) {
          const auto* xb = reinterpret_cast<const BlockQ8_K*>(x + t * xrb) + b;
          __m256i isum = _mm256_setzero_si256();
          int corr = 0;
          #pragma GCC unroll 8
          for (int k = 0; k < 8; ++k) {
            isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(Ops::dot(q[k], load32(xb->qs + 32 * k)), scale[k]));
            corr += wb->scales[2 * k] * xb->bsums[2 * k] + wb->scales[2 * k + 1] * xb->bsums[2 * k + 1];
          }
          __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(isum), _mm256_extracti128_si256(isum, 1));
          s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
          s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
          acc[r][t] += d * xb->d * static_cast<float>(_mm_cvtsi128_si32(s4) - 32 * corr);
        }
      }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < RB; ++r)
      #pragma GCC unroll 8
      for (int t = 0; t < TB; ++t) y[t * ldy + r] = acc[r][t];
  }
};

}  // namespace
}  // namespace orchard::kernels::x86
