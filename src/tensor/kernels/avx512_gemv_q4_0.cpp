// Q4_0 matrix × one token on AVX-512 VNNI, two blocks per 512-bit operation.
//
// The activations are first quantized to Q8_0 exactly as the reference does, then laid out for
// this kernel: for each pair of blocks (A, B) the 64 int8 values in the order the weight nibbles
// unpack to — A0..15, B0..15, A16..31, B16..31 — plus per block its scale d and d·Σq. Then
//   W[r]·x = Σ_b dw_b·dx_b·Σ_i q_i·x_i − 8·Σ_b dw_b·(dx_b·Σ_i x_i),   q ∈ [0, 15]
// where the first sum is one dpbusd per block pair and the second a float dot per 8 blocks.
#if defined(__x86_64__)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstring>

#include "tensor/f16.h"
#include "tensor/kernels/kernels.h"
#include "tensor/quant.h"
#include "tensor/quant_blocks.h"

namespace orchard::kernels {
namespace {

using detail::BlockQ4_0;
using detail::BlockQ8_0;

// Layout: int8 q (pair-interleaved, a lone last block padded to a pair), float d[nb], float
// s[nb] with s = d·Σq.
size_t q_bytes(int64_t nb) { return static_cast<size_t>((nb + 1) / 2) * 64; }

void prepare_q4_0(const float* x, int64_t n, std::vector<uint8_t>& out) {
  const int64_t nb = n / 32;
  std::vector<BlockQ8_0> blocks(static_cast<size_t>(nb));
  quantize_row(DType::Q8_0, x, blocks.data(), n);
  out.resize(q_bytes(nb) + 8 * static_cast<size_t>(nb));
  auto* q = reinterpret_cast<int8_t*>(out.data());
  auto* d = reinterpret_cast<float*>(out.data() + q_bytes(nb));
  float* s = d + nb;
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ8_0& blk = blocks[b];
    int sum = 0;
    for (int i = 0; i < 32; ++i) sum += blk.qs[i];
    d[b] = fp16_to_fp32(blk.d);
    s[b] = d[b] * static_cast<float>(sum);
    // Within a pair, block A fills bytes 0-15 and 32-47, block B 16-31 and 48-63.
    int8_t* pair = q + (b / 2) * 64;
    const int off = (b % 2) * 16;
    if (b == nb - 1 && nb % 2 == 1) {  // a lone last block still pairs with zeros
      std::memset(pair + 16, 0, 16);
      std::memset(pair + 48, 0, 16);
    }
    std::memcpy(pair + off, blk.qs, 16);
    std::memcpy(pair + 32 + off, blk.qs + 16, 16);
  }
}

inline float f16(uint16_t h) { return _cvtsh_ss(h); }

float dot_row(const BlockQ4_0* w, const int8_t* xq, const float* xd, const float* xs, int64_t nb) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  // Lanes 0-3 and 8-11 of a dpbusd over a pair belong to block A, lanes 4-7 and 12-15 to B.
  const __m512i pick_a = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1);
  __m512 acc = _mm512_setzero_ps();
  float corr = 0;
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    const __m256i v = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(w[b + 1].qs),
                                          reinterpret_cast<const __m128i*>(w[b].qs));
    const __m256i lo = _mm256_and_si256(v, low4);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
    const __m512i wq = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wq, _mm512_loadu_si512(xq + b * 32));
    const float da = f16(w[b].d), db = f16(w[b + 1].d);
    const __m128 pair = _mm_setr_ps(da * xd[b], db * xd[b + 1], 0, 0);
    const __m512 scale = _mm512_permutexvar_ps(pick_a, _mm512_castps128_ps512(pair));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc);
    corr += da * xs[b] + db * xs[b + 1];
  }
  float sum = _mm512_reduce_add_ps(acc);
  if (b < nb) {  // odd block count: the last block alone, scalar
    const int8_t* xp = xq + b * 32;
    int isum = 0;
    for (int i = 0; i < 16; ++i) isum += (w[b].qs[i] & 0x0F) * xp[i] + (w[b].qs[i] >> 4) * xp[32 + i];
    const float dw = f16(w[b].d);
    sum += dw * xd[b] * static_cast<float>(isum);
    corr += dw * xs[b];
  }
  return sum - 8.0f * corr;
}

void gemv_q4_0(const uint8_t* w, size_t wrb, int64_t nrows, const uint8_t* xp, int64_t n, float* y) {
  const int64_t nb = n / 32;
  const auto* xq = reinterpret_cast<const int8_t*>(xp);
  const auto* xd = reinterpret_cast<const float*>(xp + q_bytes(nb));
  const float* xs = xd + nb;
  for (int64_t r = 0; r < nrows; ++r)
    y[r] = dot_row(reinterpret_cast<const BlockQ4_0*>(w + r * wrb), xq, xd, xs, nb);
}

}  // namespace

void add_avx512_gemv(DType w, Kernels& k) {
  if (w == DType::Q4_0) {
    k.gemv_prepare = prepare_q4_0;
    k.gemv = gemv_q4_0;
  }
}

}  // namespace orchard::kernels

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif  // __x86_64__
