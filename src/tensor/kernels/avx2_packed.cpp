// Q4_0 and Q8_0 × one or many tokens on AVX2 over weights repacked at load time, 8 rows at a
// time: avx512_packed.cpp's design at half the width, for the CPUs without AVX-512.
//
// An int32 lane of maddubs + madd multiplies 4 bytes by 4 bytes. Packing puts 8 *rows* in the 8
// lanes — lane i holds 4 consecutive weights of row i — and broadcasts the matching 4 activations
// of a token to every lane, so each instruction pair advances 8 dot products by 4 elements and
// no horizontal sums are needed. Per block of 32 elements and group of 8 rows the packed form is
//   uint16 d[8]             the rows' fp16 scales
//   Q4_0: uint8 q[4][8][4]  chunk h, row i: bytes qs[4h..4h+3] of row i's block (low nibbles are
//                           elements 4h..4h+3, high nibbles elements 16+4h..16+4h+3)
//   Q8_0: int8  q[8][8][4]  chunk g, row i: qs[4g..4g+3] of row i's block
// 144 (Q4_0) or 272 (Q8_0) bytes, the same as the 8 original blocks. Activations are prepared per
// token as Q8_0 (reference-exact) into int8 q[32], float d, int32 c per block (40 bytes, the
// AVX-512 layout), and
//   dot_row = Σ_blocks dw·dx·(Σ_i q_w,i·x_i + c),   c = −8·Σx for Q4_0, 0 for Q8_0.
// Q4_0's integer sums are exact and its float steps the AVX-512 kernel's, so the two ISAs give a
// row the same bits; Q8_0 keeps ggml's 8 lane sums instead (Q8_0Format), and its many-token
// kernel (Q8_0Many) one exact sum per block.
//
// Without VNNI the product is maddubs (unsigned × signed bytes → saturating int16 pair sums)
// then madd by ones. Q4_0's nibbles (≤ 15) times activations (|x| ≤ 127) make pair sums of at
// most 3810, so a block's eight maddubs add up in int16 (≤ 30480) before the one madd. Q8_0's
// weights are signed: the unsigned operand is |w| and the activations take w's sign (pair sums
// ≤ 2·128·127 = 32512, no saturation), one madd per chunk.
#if defined(__x86_64__)
#include <algorithm>
#include <cstring>

#include "tensor/kernels/kernels.h"
#include "tensor/quant_blocks.h"

#include "tensor/kernels/avx2_target_begin.h"

#include "tensor/kernels/avx2_vec.h"

namespace orchard::kernels {
namespace {

using detail::BlockQ4_0;
using detail::BlockQ8_0;

#include "tensor/kernels/avx2_lanes.h"
#include "tensor/kernels/packed_rows.h"

constexpr int64_t kGroup = 8;

// Row i's block b, 4 bytes at a time: chunk k of the packed block holds bytes qs[4k..4k+3] of
// every row, row after row, after the rows' 8 fp16 scales.
template <class Block, int kChunks>
void pack_chunks(const uint8_t* w, size_t wrb, int64_t b, uint8_t* dst) {
  for (int64_t i = 0; i < kGroup; ++i) {
    const auto* blk = reinterpret_cast<const Block*>(w + i * wrb) + b;
    std::memcpy(dst + 2 * i, &blk->d, 2);
    for (int k = 0; k < kChunks; ++k) std::memcpy(dst + 16 + k * 32 + i * 4, blk->qs + 4 * k, 4);
  }
}


struct Q4_0Format {
  static constexpr int64_t kGroup = 8, kElems = 32;
  static constexpr size_t kXBytes = kXBlock;
  // Up to 4 tokens per pass: their accumulators and int16 partial sums, the unpacked chunk and
  // the constants fill AVX2's 16 registers.
  static constexpr int64_t kMaxTile = 4;
  static constexpr size_t kBlock = 16 + 128;
  static constexpr bool kLanes = false;
  // As on AVX-512: a group's slab of a long row must leave one token's activations in L1.
  static constexpr int64_t kSlab = 64;
  static constexpr int32_t kBias = -8;
  static constexpr auto pack_block = pack_chunks<BlockQ4_0, 4>;
  // s[t] = Σ_i q_w,i·x_t,i over the block, for TB tokens whose prepared blocks are xb[t].
  template <int TB>
  [[gnu::always_inline]] static void dots(const uint8_t* pb, const uint8_t* const xb[TB], __m256i s[TB]) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256i s16[TB];
#pragma GCC unroll 8
    for (int t = 0; t < TB; ++t) s16[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int h = 0; h < 4; ++h) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + 16 + 32 * h));
      const __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
#pragma GCC unroll 8
      for (int t = 0; t < TB; ++t) {
        s16[t] = _mm256_add_epi16(s16[t], _mm256_maddubs_epi16(lo, bcast4(xb[t] + 4 * h)));
        s16[t] = _mm256_add_epi16(s16[t], _mm256_maddubs_epi16(hi, bcast4(xb[t] + 16 + 4 * h)));
      }
    }
    const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 8
    for (int t = 0; t < TB; ++t) s[t] = _mm256_madd_epi16(s16[t], ones);
  }
};

// Q8_0 keeps ggml's rounding: its AVX2 dot product sums each block into 8 lanes (lane j: elements
// 4j..4j+3), accumulates every lane across the row's blocks with its own FMA chain and adds the
// lanes at the end. Chunk g of this layout is lane g of 8 rows, so 8 accumulators per token
// give each row exactly those chains. (One exact integer sum per block, as for Q4_0, moved a
// deepseek2 Q8_0 golden's router past a near-tie: token 16 of its greedy text changed.)
struct Q8_0Format {
  static constexpr int64_t kGroup = 8, kElems = 32;
  static constexpr size_t kXBytes = kXBlock;
  static constexpr size_t kBlock = 16 + 256;
  // Lane sums cannot be parked in y between slabs: a group's row is one pass.
  static constexpr int64_t kSlab = int64_t{1} << 40;
  static constexpr bool kLanes = true;
  static constexpr int32_t kBias = 0;
  // 2 tokens × 8 lane sums already spill; 3 measured no faster.
  static constexpr int64_t kMaxTile = 2;
  static constexpr auto pack_block = pack_chunks<BlockQ8_0, 8>;
};

// Q8_0 prompts (PackedKernels::gemm_many): one exact integer per row and block (the 8 chunks'
// madd sums added in int32) and one FMA, 4 tokens sharing each loaded chunk and its |w|. Not
// ggml's rounding, so matmul leaves it out where bits must not depend on the batch.
struct Q8_0Many : Q8_0Format {
  static constexpr bool kLanes = false;
  static constexpr int64_t kMaxTile = 4;
  template <int TB>
  [[gnu::always_inline]] static void dots(const uint8_t* pb, const uint8_t* const xb[TB], __m256i s[TB]) {
    const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 8
    for (int t = 0; t < TB; ++t) s[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + 16 + 32 * g));
      const __m256i a = _mm256_sign_epi8(w, w);
#pragma GCC unroll 8
      for (int t = 0; t < TB; ++t)
        s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(_mm256_maddubs_epi16(a, _mm256_sign_epi8(bcast4(xb[t] + 4 * g), w)), ones));
    }
  }
};

inline int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// One token's activations: per block the Q8_0 quantization, bit-identical to
// quantize_activations (d = amax/127, q = round-half-even(x · 127/amax)), its scale, and
// F::kBias·Σq.
template <class F>
void prepare(const float* x, int64_t n, uint8_t* out) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + 32 * b;
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(xb + 8 * k);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[k]));
    }
    const float m = Avx2F32::hmax(amax), d = m / 127.0f;
    const float id = m != 0.0f ? 127.0f / m : 0.0f;
    __m256i q[4];
    __m256i sum = _mm256_setzero_si256();
    for (int k = 0; k < 4; ++k) {
      const __m256 s = _mm256_mul_ps(v[k], _mm256_set1_ps(id));
      q[k] = _mm256_cvtps_epi32(s);  // MXCSR's round-to-nearest-even
      sum = _mm256_add_epi32(sum, q[k]);
    }
    // int32 → int8 in element order: the packs interleave 128-bit lanes, the permute undoes it.
    const __m256i p16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[0], q[1]), 0xD8);
    const __m256i p16b = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[2], q[3]), 0xD8);
    const __m256i p8 = _mm256_permute4x64_epi64(_mm256_packs_epi16(p16, p16b), 0xD8);
    uint8_t* dst = out + b * kXBlock;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), p8);
    const float d_rounded = _cvtsh_ss(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
    const int32_t c = F::kBias * hsum_epi32(sum);
    std::memcpy(dst + 32, &d_rounded, 4);
    std::memcpy(dst + 36, &c, 4);
  }
}

// One token is bound by the weight stream: ask for each block's lines kStreamAhead bytes before
// they are read, as the AVX-512 kernel does. (Always inlined: GCC 12 drops calls to a
// prefetch-only function.)
template <class F>
[[gnu::always_inline]] inline void request_block(const uint8_t* p) {
#pragma GCC unroll 8
  for (size_t o = 0; o < F::kBlock; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p) + o, _MM_HINT_T0);
}

// 8 rows × TB tokens over nb blocks, continuing the sums in y unless `first` (floats parked in y
// resume the one chain exactly, so slabs do not change a bit).
template <class F, int TB>
void group_tile(const uint8_t* wg, int64_t nb, const uint8_t* x, size_t xrb, float* y, int64_t ldy, bool first) {
  __m256 acc[TB];
#pragma GCC unroll 8
  for (int t = 0; t < TB; ++t) acc[t] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(y + t * ldy);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* pb = wg + b * F::kBlock;
    if constexpr (TB == 1) request_block<F>(pb + kStreamAhead);
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pb)));
    const uint8_t* xb[TB];
#pragma GCC unroll 8
    for (int t = 0; t < TB; ++t) xb[t] = x + t * xrb + b * kXBlock;
    __m256i s[TB];
    F::template dots<TB>(pb, xb, s);
#pragma GCC unroll 8
    for (int t = 0; t < TB; ++t) {
      float dx;
      int32_t c;
      std::memcpy(&dx, xb[t] + 32, 4);
      std::memcpy(&c, xb[t] + 36, 4);
      const __m256 sf = _mm256_cvtepi32_ps(_mm256_add_epi32(s[t], _mm256_set1_epi32(c)));
      acc[t] = _mm256_fmadd_ps(sf, _mm256_mul_ps(dw, _mm256_set1_ps(dx)), acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < TB; ++t) _mm256_storeu_ps(y + t * ldy, acc[t]);
}

// Q8_0Format's tile: 8 rows × TB tokens, 8 lane accumulators each, summed as ggml's hsum does
// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)).
template <class F, int TB>
void lane_tile(const uint8_t* wg, int64_t nb, const uint8_t* x, size_t xrb, float* y, int64_t ldy, bool) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[TB][8];
#pragma GCC unroll 8
  for (int t = 0; t < TB; ++t)
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) acc[t][g] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* pb = wg + b * F::kBlock;
    if constexpr (TB == 1) request_block<F>(pb + kStreamAhead);
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pb)));
    __m256 dwdx[TB];
    const uint8_t* xb[TB];
#pragma GCC unroll 8
    for (int t = 0; t < TB; ++t) {
      xb[t] = x + t * xrb + b * kXBlock;
      float dx;
      std::memcpy(&dx, xb[t] + 32, 4);
      dwdx[t] = _mm256_mul_ps(dw, _mm256_set1_ps(dx));
    }
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + 16 + 32 * g));
      const __m256i a = _mm256_sign_epi8(w, w);
#pragma GCC unroll 8
      for (int t = 0; t < TB; ++t) {
        const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(a, _mm256_sign_epi8(bcast4(xb[t] + 4 * g), w)), ones);
        acc[t][g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), dwdx[t], acc[t][g]);
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < TB; ++t) {
    _mm256_storeu_ps(y + t * ldy, ggml_lane_sum(acc[t]));
  }
}

template <class F, int TB>
constexpr GroupTileFn tile_for() {
  if constexpr (F::kLanes)
    return lane_tile<F, TB>;
  else
    return group_tile<F, TB>;
}
// kTiles<F>[tb - 1] computes tb tokens (the entries past F::kMaxTile are never called).
template <class F>
constexpr GroupTileFn kTiles[4] = {tile_for<F, 1>(), tile_for<F, 2>(), tile_for<F, 3>(), tile_for<F, 4>()};

template <class F>
constexpr PackedKernels kernels_for{kGroup, F::kSlab * 32, pack_bytes<F>, pack<F>, prep_bytes<F>, prepare<F>, packed_gemm<F, kTiles<F>>, /*one_token=*/true};
constexpr PackedKernels kQ8_0{kGroup,
                              Q8_0Format::kSlab * 32,
                              pack_bytes<Q8_0Format>,
                              pack<Q8_0Format>,
                              prep_bytes<Q8_0Format>,
                              prepare<Q8_0Format>,
                              packed_gemm<Q8_0Format, kTiles<Q8_0Format>>,
                              /*one_token=*/true,
                              /*min_cols=*/0,
                              /*gemm_many=*/packed_gemm<Q8_0Many, kTiles<Q8_0Many>>};

}  // namespace

const PackedKernels* avx2_packed(DType w) {
  if (w == DType::Q4_0) return &kernels_for<Q4_0Format>;
  if (w == DType::Q8_0) return &kQ8_0;
  if (w == DType::F16) return avx2_f16_packed();
  return nullptr;
}

}  // namespace orchard::kernels

#include "tensor/kernels/avx2_target_end.h"
#endif  // __x86_64__
