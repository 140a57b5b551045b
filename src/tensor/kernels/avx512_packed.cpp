// Q4_0 and Q8_0 × one or many tokens on AVX-512 VNNI over weights repacked at load time, 16 rows
// at a time.
//
// A dpbusd lane multiplies 4 bytes by 4 bytes. Packing puts 16 *rows* in the 16 lanes — lane i
// holds 4 consecutive weights of row i — and broadcasts the matching 4 activations of a token to
// every lane, so one instruction advances 16 dot products by 4 elements and no horizontal sums
// are ever needed. Per block of 32 elements and group of 16 rows the packed form is
//   uint16 d[16]            the rows' fp16 scales
//   uint8  q[4][16][4]      chunk h, row i: bytes qs[4h..4h+3] of row i's block (low nibbles are
//                           elements 4h..4h+3, high nibbles elements 16+4h..16+4h+3)
// 288 bytes, the same as the 16 original blocks. Activations are prepared per token as Q8_0
// (reference-exact) into: int8 q[32], float d, int32 −8·Σq per block (40 bytes), so
//   dot_row = Σ_blocks dw·dx·(Σ_i q_w,i·x_i − 8·Σ_i x_i).
// Q8_0 follows the same plan with its weight bytes' sign bits flipped at pack time (Q8_0Format),
// but for generation and batch-invariant products keeps ggml's rounding (lane_gemm).
#if defined(__x86_64__)
#include <algorithm>
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

#include "tensor/kernels/packed_rows.h"

// Activations 4k..4k+3 of a block in every lane, from the block's 16 bytes holding them
// broadcast to each 128-bit lane (`quad`): an in-lane shuffle. Eight broadcast loads per block
// and token (one per dpbusd) bound the one-token kernel at ~13 cycles per block; two 16-byte
// broadcasts and eight shuffles: Q4_0 66 → 85 GB/s on one core with the weights in L1, 1b
// generation 1.077× (Q4_0) and 1.03× (Q8_0) at 2 threads, the two side by side in one process;
// prompts unchanged.
template <int k>
inline __m512i pick4(__m512i quad) {
  return _mm512_shuffle_epi32(quad, static_cast<_MM_PERM_ENUM>((k & 3) * 0x55));
}

// Q4_0: see the file comment. Weights are the unsigned operand (nibbles 0..15), activations the
// signed one; the −8 offset enters as the per-token start value −8·Σx.
struct Q4_0Format {
  // Up to 16 tokens per pass: 16 accumulators and the block's 8 weight registers still fit the
  // 32 (no vector spills), and a decoding batch of 9–16 sequences then loads each group's weights
  // once instead of twice (engine step of 16 tiny-model sequences ~5 % faster, 9 sequences
  // ~12 %, than passes of 8).
  static constexpr int64_t kGroup = 16, kMaxTile = 16, kElems = 32;
  static constexpr size_t kXBytes = kXBlock;
  static constexpr bool kChunkBias = false;
  static constexpr size_t kBlock = 32 + 256;
  // One token reads a block's activations (40 bytes) once per group; with a whole long row per
  // group, the weights streamed in between (74 KB for an 8192-wide row) pushed them out of L1
  // and the refills slowed the stream: 1b's down projection read at 0.85× the speed of its gate
  // projection, same bytes. In slabs of 64 blocks a group is 18 KB and the activations 2.5 KB.
  static constexpr int64_t kSlab = 64;
  static void pack_block(const uint8_t* w, size_t wrb, int64_t b, uint8_t* dst) {
    for (int64_t i = 0; i < kGroup; ++i) {
      const auto* blk = reinterpret_cast<const BlockQ4_0*>(w + i * wrb) + b;
      std::memcpy(dst + 2 * i, &blk->d, 2);
      for (int h = 0; h < 4; ++h) std::memcpy(dst + 32 + h * 64 + i * 4, blk->qs + 4 * h, 4);
    }
  }
  // wq[g] multiplies activations 4g..4g+3.
  static void unpack(const uint8_t* pb, __m512i wq[8]) {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    // Unrolled, so wq stays in registers (a loop left the weights on the stack and back).
#pragma GCC unroll 4
    for (int h = 0; h < 4; ++h) {
      const __m512i v = _mm512_loadu_si512(pb + 32 + 64 * h);
      wq[h] = _mm512_and_si512(v, low4);
      wq[h + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
    }
  }
  static constexpr int32_t kBias = -8;
};

// Q8_0 as Q4_0, with the weights made the unsigned operand by flipping their sign bits at pack
// time (w + 128, 0..255); the per-token start value −128·Σx takes the 128 back out. Nothing per
// row is stored besides the original bytes, so the packed copy is the file's size. (The first
// version made the activations unsigned instead and stored −128·Σw per row and block: 12 % more
// bytes, which one token — bound by the weight stream — paid in full, so generation kept the
// row-major copy, whose kernel reads 44 GB/s on one core with the matrix in L2 against 97–116
// for this layout: too slow to keep up with the stream at two threads. 1b Q8_0 generation, the
// two side by side in one process: 1.32× at 2 threads, 1.03× at 1.)
struct Q8_0Format {
  static constexpr int64_t kGroup = 16, kMaxTile = 16, kElems = 32;
  // The prepared block also carries each 4-element chunk's −128·Σx (lane_gemm's lane start values).
  static constexpr size_t kXBytes = kXBlock + 32;
  static constexpr bool kChunkBias = true;
  static constexpr size_t kBlock = 32 + 512;
  static constexpr int64_t kSlab = 64;  // as Q4_0
  static void pack_block(const uint8_t* w, size_t wrb, int64_t b, uint8_t* dst) {
    for (int64_t i = 0; i < kGroup; ++i) {
      const auto* blk = reinterpret_cast<const BlockQ8_0*>(w + i * wrb) + b;
      std::memcpy(dst + 2 * i, &blk->d, 2);
      for (int g = 0; g < 8; ++g)
        for (int k = 0; k < 4; ++k) dst[32 + g * 64 + i * 4 + k] = static_cast<uint8_t>(blk->qs[4 * g + k]) ^ 0x80;
    }
  }
  static void unpack(const uint8_t* pb, __m512i wq[8]) {
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      wq[g] = _mm512_loadu_si512(pb + 32 + 64 * g);
      // Held in a register: left to itself GCC folds the load into every token's dpbusd in
      // some tiles (4 tokens), and two loads per dpbusd then bound the tile.
      asm("" : "+v"(wq[g]));
    }
  }
  static constexpr int32_t kBias = -128;
};

// One token's activations: per block the signed Q8_0 quantization (quantize_activations'), its scale,
// and the start value F::kBias·Σq that takes the weights' unsigned offset back out (−8 for
// Q4_0's nibbles, −128 for Q8_0's flipped bytes).
template <class F>
void prepare(const float* x, int64_t n, uint8_t* out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    uint8_t* dst = out + b * F::kXBytes;
    float d;
    const __m256i q = x86::quantize_block_q8_0(x + 32 * b, d);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), q);
    const int32_t sum = _mm512_reduce_add_epi32(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q))) +
                        _mm512_reduce_add_epi32(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1)));
    const int32_t c = F::kBias * sum;
    std::memcpy(dst + 32, &d, 4);
    std::memcpy(dst + 36, &c, 4);
    if constexpr (F::kChunkBias) {
      // chunk g's F::kBias·Σ x[4g..4g+3]: dpbusd of all-ones bytes sums each 4 in its lane
      const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), q);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 40), _mm256_mullo_epi32(sums, _mm256_set1_epi32(F::kBias)));
    }
  }
}

// One token is bound by the weight stream, and the hardware prefetcher alone kept too few of its
// lines in flight: asking for each block's lines kStreamAhead bytes before they are read gave
// 1b generation 1.08–1.31× (Q4_0, 2 threads), 1.16× (Q4_0, 1 thread) and 1.06–1.09× (Q8_0,
// 2 threads; 1.0× at 1), against the same engine without it, alternating in one process; 8 KB
// ahead measured the same. (Always inlined: GCC 12 drops calls to a prefetch-only function.)
template <class F>
[[gnu::always_inline]] inline void request_block(const uint8_t* p) {
#pragma GCC unroll 16
  for (size_t o = 0; o < F::kBlock; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p) + o, _MM_HINT_T0);
}

// 16 rows × TB tokens over nb blocks, continuing the sums in y unless `first` (floats parked in
// y resume the one chain exactly, so slabs do not change a bit).
template <class F, int TB>
void group_tile(const uint8_t* wg, int64_t nb, const uint8_t* x, size_t xrb, float* y, int64_t ldy, bool first) {
  __m512 acc[TB];
#pragma GCC unroll 16
  for (int t = 0; t < TB; ++t) acc[t] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(y + t * ldy);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* pb = wg + b * F::kBlock;
    if constexpr (TB == 1) request_block<F>(pb + kStreamAhead);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb)));
    __m512i wq[8];
    F::unpack(pb, wq);
#pragma GCC unroll 16
    for (int t = 0; t < TB; ++t) {
      const uint8_t* xb = x + t * xrb + b * F::kXBytes;
      float dx;
      int32_t c;
      std::memcpy(&dx, xb + 32, 4);
      std::memcpy(&c, xb + 36, 4);
      const __m512i lo = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xb)));
      const __m512i hi = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xb + 16)));
      // Weights unsigned, activations signed; two chains halve the dependent-dpbusd latency.
      __m512i s0 = _mm512_set1_epi32(c), s1 = _mm512_setzero_si512();
      s0 = _mm512_dpbusd_epi32(s0, wq[0], pick4<0>(lo));
      s1 = _mm512_dpbusd_epi32(s1, wq[1], pick4<1>(lo));
      s0 = _mm512_dpbusd_epi32(s0, wq[2], pick4<2>(lo));
      s1 = _mm512_dpbusd_epi32(s1, wq[3], pick4<3>(lo));
      s0 = _mm512_dpbusd_epi32(s0, wq[4], pick4<0>(hi));
      s1 = _mm512_dpbusd_epi32(s1, wq[5], pick4<1>(hi));
      s0 = _mm512_dpbusd_epi32(s0, wq[6], pick4<2>(hi));
      s1 = _mm512_dpbusd_epi32(s1, wq[7], pick4<3>(hi));
      const __m512 sf = _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1));
      acc[t] = _mm512_fmadd_ps(sf, _mm512_mul_ps(dw, _mm512_set1_ps(dx)), acc[t]);
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < TB; ++t) _mm512_storeu_ps(y + t * ldy, acc[t]);
}

// kTiles<F>[tb - 1] is group_tile<F, tb>.
template <class F>
constexpr GroupTileFn kTiles[16] = {group_tile<F, 1>,  group_tile<F, 2>,  group_tile<F, 3>,  group_tile<F, 4>,
                                    group_tile<F, 5>,  group_tile<F, 6>,  group_tile<F, 7>,  group_tile<F, 8>,
                                    group_tile<F, 9>,  group_tile<F, 10>, group_tile<F, 11>, group_tile<F, 12>,
                                    group_tile<F, 13>, group_tile<F, 14>, group_tile<F, 15>, group_tile<F, 16>};

// Q8_0 in ggml's rounding (what llama.cpp computes on x86, and the AVX2 packed kernel): its dot
// product sums each block into 8 lanes (lane l: elements 4l..4l+3), runs one FMA chain per lane
// across the row's blocks and adds the lanes at the end. Chunk l of the layout is lane l of 16
// rows, so 8 accumulators per token give each row exactly those chains. (One exact integer per
// block, Q8_0Format's tiles, kept for many-token prompts, moved a mixtral Q8_0 golden's router
// past a near-tie: one of 140 routing decisions, a logit by 2.2.)
//
// lane_row: group g's 16 rows × TB tokens over the whole row, slab after slab (8 lane sums per
// token cannot be parked in y between slabs as one sum can), the lanes added at the end as
// ggml's hsum does: ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)).
template <class F, int TB>
void lane_row(const uint8_t* w, int64_t ngroups, int64_t nb, int64_t g, const uint8_t* x, size_t xrb, float* y,
              int64_t ldy) {
  __m512 acc[TB][8];
#pragma GCC unroll 8
  for (int t = 0; t < TB; ++t)
#pragma GCC unroll 8
    for (int l = 0; l < 8; ++l) acc[t][l] = _mm512_setzero_ps();
  for (int64_t s0 = 0; s0 < nb; s0 += F::kSlab) {
    const uint8_t* wg = w + slab_offset<F>(ngroups, nb, s0, g);
    const int64_t len = std::min<int64_t>(F::kSlab, nb - s0);
    for (int64_t b = 0; b < len; ++b) {
      const uint8_t* pb = wg + b * F::kBlock;
      if constexpr (TB == 1) request_block<F>(pb + kStreamAhead);
      const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb)));
      __m512i wq[8];
      F::unpack(pb, wq);
#pragma GCC unroll 8
      for (int t = 0; t < TB; ++t) {
        const uint8_t* xb = x + t * xrb + (s0 + b) * F::kXBytes;
        float dx;
        std::memcpy(&dx, xb + 32, 4);
        const __m512 dwdx = _mm512_mul_ps(dw, _mm512_set1_ps(dx));
        const __m512i lo = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xb)));
        const __m512i hi = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xb + 16)));
        const auto* cg = reinterpret_cast<const int32_t*>(xb + 40);
        const __m512i s[8] = {
            _mm512_dpbusd_epi32(_mm512_set1_epi32(cg[0]), wq[0], pick4<0>(lo)),
            _mm512_dpbusd_epi32(_mm512_set1_epi32(cg[1]), wq[1], pick4<1>(lo)),
            _mm512_dpbusd_epi32(_mm512_set1_epi32(cg[2]), wq[2], pick4<2>(lo)),
            _mm512_dpbusd_epi32(_mm512_set1_epi32(cg[3]), wq[3], pick4<3>(lo)),
            _mm512_dpbusd_epi32(_mm512_set1_epi32(cg[4]), wq[4], pick4<0>(hi)),
            _mm512_dpbusd_epi32(_mm512_set1_epi32(cg[5]), wq[5], pick4<1>(hi)),
            _mm512_dpbusd_epi32(_mm512_set1_epi32(cg[6]), wq[6], pick4<2>(hi)),
            _mm512_dpbusd_epi32(_mm512_set1_epi32(cg[7]), wq[7], pick4<3>(hi)),
        };
#pragma GCC unroll 8
        for (int l = 0; l < 8; ++l) acc[t][l] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[l]), dwdx, acc[t][l]);
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < TB; ++t) {
    const __m512 a = _mm512_add_ps(_mm512_add_ps(acc[t][0], acc[t][4]), _mm512_add_ps(acc[t][2], acc[t][6]));
    const __m512 c = _mm512_add_ps(_mm512_add_ps(acc[t][1], acc[t][5]), _mm512_add_ps(acc[t][3], acc[t][7]));
    _mm512_storeu_ps(y + t * ldy, _mm512_add_ps(a, c));
  }
}

// PackedGemmFn in ggml's rounding: groups of rows, then tokens two at a time (2 × 8 lane
// accumulators, the block's 8 weight registers and the shuffles fit the 32).
void lane_gemm(const uint8_t* w, int64_t rows, int64_t r0, int64_t r1, const uint8_t* x, size_t xrb, int64_t ntok,
               int64_t n, float* y, int64_t ldy) {
  using F = Q8_0Format;
  const int64_t nb = n / F::kElems, ngroups = rows / F::kGroup;
  for (int64_t g = r0 / F::kGroup; g < r1 / F::kGroup; ++g) {
    float* yg = y + (g * F::kGroup - r0);
    for (int64_t t = 0; t < ntok; t += 2) {
      if (ntok - t >= 2)
        lane_row<F, 2>(w, ngroups, nb, g, x + t * xrb, xrb, yg + t * ldy, ldy);
      else
        lane_row<F, 1>(w, ngroups, nb, g, x + t * xrb, xrb, yg + t * ldy, ldy);
    }
  }
}

template <class F>
constexpr PackedKernels kernels_for{F::kGroup, F::kSlab * 32, pack_bytes<F>, pack<F>, prep_bytes<F>, prepare<F>, packed_gemm<F, kTiles<F>>, /*one_token=*/true};
// Generation and batch-invariant products in ggml's rounding; prompts in Q8_0Format's faster
// tiles (the same packed copy and prepared activations).
constexpr PackedKernels kQ8_0{Q8_0Format::kGroup,
                              Q8_0Format::kSlab * 32,
                              pack_bytes<Q8_0Format>,
                              pack<Q8_0Format>,
                              prep_bytes<Q8_0Format>,
                              prepare<Q8_0Format>,
                              lane_gemm,
                              /*one_token=*/true,
                              /*min_cols=*/0,
                              /*gemm_many=*/packed_gemm<Q8_0Format, kTiles<Q8_0Format>>};

}  // namespace

const PackedKernels* avx512_packed(DType w) {
  if (w == DType::Q4_0) return &kernels_for<Q4_0Format>;
  if (w == DType::Q8_0) return &kQ8_0;
  if (w == DType::F16) return avx512_f16_packed();
  return nullptr;
}

}  // namespace orchard::kernels

#include "tensor/kernels/avx512_target_end.h"
#endif  // __x86_64__
