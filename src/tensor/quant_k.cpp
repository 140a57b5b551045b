// The K-quants (256-element super-blocks): Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, and the Q8_K
// activation format.  Layouts follow ggml-common.h.  Each format is first unpacked into its
// integer levels (one int8 per element, in element order) and its sub-block scales; both the
// dequantizer and the dot product are written on top of that, with the float arithmetic of
// ggml-quants.c's dequantize_row_* so results are bitwise those of ggml and gguf-py.

#include "tensor/ggml_rounding.h"  // first: no contraction into FMAs below

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/f16.h"
#include "tensor/quant_blocks.h"

namespace orchard::detail {
namespace {

// ---- unpacking ------------------------------------------------------------------------------

// Q2_K: each qs byte holds four 2-bit levels; byte 32n+l gives elements 128n + 32j + l for
// shifts 2j.  scales[e/16]: low nibble scale, high nibble min.
void levels_q2_k(const BlockQ2_K& b, int8_t* q) {
  for (int n = 0; n < 2; ++n)
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < 32; ++l)
        q[128 * n + 32 * j + l] = static_cast<int8_t>((b.qs[32 * n + l] >> (2 * j)) & 3);
}

// Q3_K: same 2-bit packing as Q2_K; bit (4n + j) of hmask[l] is the third bit, and a clear bit
// means "subtract 4", so levels are -4..3.
void levels_q3_k(const BlockQ3_K& b, int8_t* q) {
  for (int n = 0; n < 2; ++n)
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < 32; ++l) {
        const int low = (b.qs[32 * n + l] >> (2 * j)) & 3;
        const bool high = (b.hmask[l] >> (4 * n + j)) & 1;
        q[128 * n + 32 * j + l] = static_cast<int8_t>(low - (high ? 0 : 4));
      }
}

// Q3_K's sixteen 6-bit scales, stored with a bias of 32: the low nibbles of scales 0-7 and
// 8-15 are the low and high nibbles of bytes 0-7; bytes 8-11 carry the top two bits, scale
// 4g+k taking bits 2g..2g+1 of byte 8+k.
void scales_q3_k(const BlockQ3_K& b, int* sc) {
  for (int s = 0; s < 16; ++s) {
    const int g = s / 4;
    const int k = s % 4;
    const uint8_t src = b.scales[(g & 1) * 4 + k];
    const int low = g < 2 ? (src & 0x0F) : (src >> 4);
    const int high = (b.scales[8 + k] >> (2 * g)) & 3;
    sc[s] = (low | (high << 4)) - 32;
  }
}

// Q4_K: qs byte 32j+l holds element 64j+l (low nibble) and 64j+32+l (high nibble).
void levels_q4_k(const BlockQ4_K& b, int8_t* q) {
  for (int j = 0; j < 4; ++j)
    for (int l = 0; l < 32; ++l) {
      q[64 * j + l] = static_cast<int8_t>(b.qs[32 * j + l] & 0x0F);
      q[64 * j + 32 + l] = static_cast<int8_t>(b.qs[32 * j + l] >> 4);
    }
}

// Q5_K: Q4_K's nibbles plus a fifth bit: bit 2j of qh[l] for element 64j+l, bit 2j+1 for
// element 64j+32+l.
void levels_q5_k(const BlockQ5_K& b, int8_t* q) {
  for (int j = 0; j < 4; ++j)
    for (int l = 0; l < 32; ++l) {
      const int h0 = ((b.qh[l] >> (2 * j)) & 1) << 4;
      const int h1 = ((b.qh[l] >> (2 * j + 1)) & 1) << 4;
      q[64 * j + l] = static_cast<int8_t>((b.qs[32 * j + l] & 0x0F) | h0);
      q[64 * j + 32 + l] = static_cast<int8_t>((b.qs[32 * j + l] >> 4) | h1);
    }
}

// Q6_K: per half (n = 0, 1) of 128 elements, ql[64n + l] and ql[64n + 32 + l] hold the low
// nibbles of elements l, 32+l (low nibble) and 64+l, 96+l (high nibble); qh[32n + l] holds the
// four 2-bit high parts in that same order.  Levels are stored with a bias of 32.
void levels_q6_k(const BlockQ6_K& b, int8_t* q) {
  for (int n = 0; n < 2; ++n) {
    const uint8_t* ql = b.ql + 64 * n;
    const uint8_t* qh = b.qh + 32 * n;
    int8_t* out = q + 128 * n;
    for (int l = 0; l < 32; ++l) {
      out[l] = static_cast<int8_t>(((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32);
      out[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32);
      out[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      out[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
}

// Sum of q[i] * x[i] over `n` elements.
int dot_i8(const int8_t* q, const int8_t* x, int n) {
  int s = 0;
  for (int i = 0; i < n; ++i) s += q[i] * x[i];
  return s;
}

}  // namespace

// ---- dequantization -------------------------------------------------------------------------

void dequantize_q2_k(const void* src, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockQ2_K*>(src);
  int8_t q[kQK_K];
  for (int64_t i = 0; i < nb; ++i) {
    levels_q2_k(b[i], q);
    const float d = fp16_to_fp32(b[i].d);
    const float dmin = fp16_to_fp32(b[i].dmin);
    for (int g = 0; g < 16; ++g) {
      const float dl = d * static_cast<float>(b[i].scales[g] & 0x0F);
      const float ml = dmin * static_cast<float>(b[i].scales[g] >> 4);
      for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<float>(q[16 * g + l]) - ml;
    }
  }
}

void dequantize_q3_k(const void* src, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockQ3_K*>(src);
  int8_t q[kQK_K];
  int sc[16];
  for (int64_t i = 0; i < nb; ++i) {
    levels_q3_k(b[i], q);
    scales_q3_k(b[i], sc);
    const float d = fp16_to_fp32(b[i].d);
    for (int g = 0; g < 16; ++g) {
      const float dl = d * static_cast<float>(sc[g]);
      for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<float>(q[16 * g + l]);
    }
  }
}

// Q4_K and Q5_K share the scale/min layout and the formula d*sc*q - dmin*m per 32 elements.
static void dequantize_k4_levels(uint16_t d16, uint16_t dmin16, const uint8_t* scales,
                                 const int8_t* q, float* y) {
  const float d = fp16_to_fp32(d16);
  const float dmin = fp16_to_fp32(dmin16);
  for (int s = 0; s < 8; ++s) {
    int sc, m;
    scale_min_k4(s, scales, sc, m);
    const float ds = d * static_cast<float>(sc);
    const float ms = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) y[32 * s + l] = ds * static_cast<float>(q[32 * s + l]) - ms;
  }
}

void dequantize_q4_k(const void* src, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockQ4_K*>(src);
  int8_t q[kQK_K];
  for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
    levels_q4_k(b[i], q);
    dequantize_k4_levels(b[i].d, b[i].dmin, b[i].scales, q, y);
  }
}

void dequantize_q5_k(const void* src, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockQ5_K*>(src);
  int8_t q[kQK_K];
  for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
    levels_q5_k(b[i], q);
    dequantize_k4_levels(b[i].d, b[i].dmin, b[i].scales, q, y);
  }
}

void dequantize_q6_k(const void* src, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockQ6_K*>(src);
  int8_t q[kQK_K];
  for (int64_t i = 0; i < nb; ++i) {
    levels_q6_k(b[i], q);
    const float d = fp16_to_fp32(b[i].d);
    for (int g = 0; g < 16; ++g) {
      const float ds = d * static_cast<float>(b[i].scales[g]);  // (d * sc) * q, as ggml
      for (int l = 0; l < 16; ++l) *y++ = ds * static_cast<float>(q[16 * g + l]);
    }
  }
}

void dequantize_q8_k(const void* src, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockQ8_K*>(src);
  for (int64_t i = 0; i < nb; ++i)
    for (int j = 0; j < kQK_K; ++j) *y++ = b[i].d * static_cast<float>(b[i].qs[j]);
}

// ---- integer levels (see LevelsFn) -----------------------------------------------------------

namespace {

// Q4_K/Q5_K: sub-block s of 32 is d·sc·q − dmin·m, so both its groups of 16 take scale d·sc
// and offset −dmin·m (the dequantizer's two products, each rounded as there).
void k4_scales(uint16_t d16, uint16_t dmin16, const uint8_t* scales, float* scale, float* offset) {
  const float d = fp16_to_fp32(d16), dmin = fp16_to_fp32(dmin16);
  for (int s = 0; s < 8; ++s) {
    int sc, m;
    scale_min_k4(s, scales, sc, m);
    scale[2 * s] = scale[2 * s + 1] = d * static_cast<float>(sc);
    offset[2 * s] = offset[2 * s + 1] = -(dmin * static_cast<float>(m));
  }
}

}  // namespace

void levels_q4_k(const void* src, int8_t* q, float* scale, float* offset, int64_t nb) {
  const auto* b = static_cast<const BlockQ4_K*>(src);
  for (int64_t i = 0; i < nb; ++i, q += kQK_K, scale += 16, offset += 16) {
    levels_q4_k(b[i], q);
    k4_scales(b[i].d, b[i].dmin, b[i].scales, scale, offset);
  }
}

void levels_q5_k(const void* src, int8_t* q, float* scale, float* offset, int64_t nb) {
  const auto* b = static_cast<const BlockQ5_K*>(src);
  for (int64_t i = 0; i < nb; ++i, q += kQK_K, scale += 16, offset += 16) {
    levels_q5_k(b[i], q);
    k4_scales(b[i].d, b[i].dmin, b[i].scales, scale, offset);
  }
}

void levels_q6_k(const void* src, int8_t* q, float* scale, float* offset, int64_t nb) {
  const auto* b = static_cast<const BlockQ6_K*>(src);
  for (int64_t i = 0; i < nb; ++i, q += kQK_K, scale += 16, offset += 16) {
    levels_q6_k(b[i], q);
    const float d = fp16_to_fp32(b[i].d);
    for (int g = 0; g < 16; ++g) {
      scale[g] = d * static_cast<float>(b[i].scales[g]);
      offset[g] = 0.0f;
    }
  }
}

// ---- Q8_K quantization (ggml's quantize_row_q8_K_ref) ----------------------------------------

void quantize_q8_k(const float* x, void* dst, int64_t nb) {
  auto* b = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    // The signed value of largest magnitude maps to exactly -127 (not +-128: ggml keeps the
    // range symmetric for its IQ kernels).
    // (the largest magnitude, then the first value that has it: ggml's one-pass scan keeps the
    // first too; two branch-free passes vectorise)
    float amax = 0.0f;
    for (int j = 0; j < kQK_K; ++j) amax = std::max(amax, std::fabs(x[j]));
    int first = 0;
    while (first < kQK_K - 1 && std::fabs(x[first]) != amax) ++first;
    const float max = x[first];
    if (amax == 0.0f) {
      b[i].d = 0.0f;
      std::memset(b[i].qs, 0, sizeof b[i].qs);
      std::memset(b[i].bsums, 0, sizeof b[i].bsums);  // ggml leaves them unset; we zero them
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQK_K; ++j)
      b[i].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += b[i].qs[16 * g + l];
      b[i].bsums[g] = static_cast<int16_t>(sum);
    }
    b[i].d = 1.0f / iscale;
  }
}

// ---- dot products with Q8_K ------------------------------------------------------------------
// Per super-block: an exact integer sum of scale * sum(q_w * q_x) over sub-blocks, then one
// float multiply by d_w * d_x.  Mins use Q8_K's bsums: sum over a sub-block of m * q_x.

float vec_dot_q2_k_q8_k(const void* w, const void* xq, int64_t nb) {
  const auto* a = static_cast<const BlockQ2_K*>(w);
  const auto* x = static_cast<const BlockQ8_K*>(xq);
  int8_t q[kQK_K];
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    levels_q2_k(a[i], q);
    int isum = 0;
    int summs = 0;
    for (int g = 0; g < 16; ++g) {
      isum += (a[i].scales[g] & 0x0F) * dot_i8(q + 16 * g, x[i].qs + 16 * g, 16);
      summs += (a[i].scales[g] >> 4) * x[i].bsums[g];
    }
    const float dall = x[i].d * fp16_to_fp32(a[i].d);
    const float dmin = x[i].d * fp16_to_fp32(a[i].dmin);
    sum += dall * static_cast<float>(isum) - dmin * static_cast<float>(summs);
  }
  return sum;
}

float vec_dot_q3_k_q8_k(const void* w, const void* xq, int64_t nb) {
  const auto* a = static_cast<const BlockQ3_K*>(w);
  const auto* x = static_cast<const BlockQ8_K*>(xq);
  int8_t q[kQK_K];
  int sc[16];
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    levels_q3_k(a[i], q);
    scales_q3_k(a[i], sc);
    int isum = 0;
    for (int g = 0; g < 16; ++g) isum += sc[g] * dot_i8(q + 16 * g, x[i].qs + 16 * g, 16);
    sum += fp16_to_fp32(a[i].d) * x[i].d * static_cast<float>(isum);
  }
  return sum;
}

// Q4_K and Q5_K differ only in their levels.
static float dot_k4_levels(uint16_t d16, uint16_t dmin16, const uint8_t* scales, const int8_t* q,
                           const BlockQ8_K& x) {
  int isum = 0;
  int summs = 0;
  for (int s = 0; s < 8; ++s) {
    int sc, m;
    scale_min_k4(s, scales, sc, m);
    isum += sc * dot_i8(q + 32 * s, x.qs + 32 * s, 32);
    summs += m * (x.bsums[2 * s] + x.bsums[2 * s + 1]);
  }
  const float d = fp16_to_fp32(d16) * x.d;
  const float dmin = fp16_to_fp32(dmin16) * x.d;
  return d * static_cast<float>(isum) - dmin * static_cast<float>(summs);
}

float vec_dot_q4_k_q8_k(const void* w, const void* xq, int64_t nb) {
  const auto* a = static_cast<const BlockQ4_K*>(w);
  const auto* x = static_cast<const BlockQ8_K*>(xq);
  int8_t q[kQK_K];
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    levels_q4_k(a[i], q);
    sum += dot_k4_levels(a[i].d, a[i].dmin, a[i].scales, q, x[i]);
  }
  return sum;
}

float vec_dot_q5_k_q8_k(const void* w, const void* xq, int64_t nb) {
  const auto* a = static_cast<const BlockQ5_K*>(w);
  const auto* x = static_cast<const BlockQ8_K*>(xq);
  int8_t q[kQK_K];
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    levels_q5_k(a[i], q);
    sum += dot_k4_levels(a[i].d, a[i].dmin, a[i].scales, q, x[i]);
  }
  return sum;
}

float vec_dot_q6_k_q8_k(const void* w, const void* xq, int64_t nb) {
  const auto* a = static_cast<const BlockQ6_K*>(w);
  const auto* x = static_cast<const BlockQ8_K*>(xq);
  int8_t q[kQK_K];
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    levels_q6_k(a[i], q);
    int isum = 0;
    for (int g = 0; g < 16; ++g) isum += a[i].scales[g] * dot_i8(q + 16 * g, x[i].qs + 16 * g, 16);
    sum += fp16_to_fp32(a[i].d) * x[i].d * static_cast<float>(isum);
  }
  return sum;
}

float vec_dot_q8_k_q8_k(const void* w, const void* xq, int64_t nb) {
  const auto* a = static_cast<const BlockQ8_K*>(w);
  const auto* x = static_cast<const BlockQ8_K*>(xq);
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i)
    sum += a[i].d * x[i].d * static_cast<float>(dot_i8(a[i].qs, x[i].qs, kQK_K));
  return sum;
}

}  // namespace orchard::detail
