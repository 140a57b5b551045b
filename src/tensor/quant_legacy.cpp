// The 32-element block formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and the Q8_1 activation format.
// Layouts follow ggml-common.h; the arithmetic follows ggml-quants.c's reference functions step
// for step, because files we quantize must be byte-identical to llama-quantize's and our
// dequantized values bitwise-identical to ggml's and gguf-py's.

#include "tensor/ggml_rounding.h"  // first: no contraction into FMAs below

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/f16.h"
#include "tensor/quant_blocks.h"

namespace orchard::detail {
namespace {

uint32_t load_qh(const uint8_t qh[4]) {
  uint32_t v;
  std::memcpy(&v, qh, sizeof v);  // little-endian word, as written by ggml on x86/ARM
  return v;
}

// The fifth bits of elements j (low half) and j+16 (high half), shifted to bit 4.
uint8_t high_bit_lo(uint32_t qh, int j) { return static_cast<uint8_t>(((qh >> j) << 4) & 0x10u); }
uint8_t high_bit_hi(uint32_t qh, int j) { return static_cast<uint8_t>((qh >> (j + 12)) & 0x10u); }

// The element of largest magnitude, with its sign (the first one on ties), as Q4_0/Q5_0 use:
// mapping it to exactly -8 (or -16) spends the asymmetric extra level on the biggest value.
float signed_absmax(const float* x) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < kQK; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void min_max(const float* x, float& min, float& max) {
  min = 3.402823466e+38f;  // FLT_MAX, as ggml starts
  max = -3.402823466e+38f;
  for (int j = 0; j < kQK; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
}

float absmax(const float* x) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  return amax;
}

}  // namespace

// ---- dequantization ----------------------------------------------------------------------

void dequantize_q4_0(const void* src, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockQ4_0*>(src);
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>((b[i].qs[j] & 0x0F) - 8) * d;
      y[j + kQK / 2] = static_cast<float>((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_q4_1(const void* src, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockQ4_1*>(src);
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(b[i].d);
    const float m = fp16_to_fp32(b[i].m);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>(b[i].qs[j] & 0x0F) * d + m;
      y[j + kQK / 2] = static_cast<float>(b[i].qs[j] >> 4) * d + m;
    }
  }
}

void dequantize_q5_0(const void* src, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockQ5_0*>(src);
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(b[i].d);
    const uint32_t qh = load_qh(b[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int x0 = ((b[i].qs[j] & 0x0F) | high_bit_lo(qh, j)) - 16;
      const int x1 = ((b[i].qs[j] >> 4) | high_bit_hi(qh, j)) - 16;
      y[j] = static_cast<float>(x0) * d;
      y[j + kQK / 2] = static_cast<float>(x1) * d;
    }
  }
}

void dequantize_q5_1(const void* src, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockQ5_1*>(src);
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(b[i].d);
    const float m = fp16_to_fp32(b[i].m);
    const uint32_t qh = load_qh(b[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int x0 = (b[i].qs[j] & 0x0F) | high_bit_lo(qh, j);
      const int x1 = (b[i].qs[j] >> 4) | high_bit_hi(qh, j);
      y[j] = static_cast<float>(x0) * d + m;
      y[j + kQK / 2] = static_cast<float>(x1) * d + m;
    }
  }
}

void dequantize_q8_0(const void* src, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

void dequantize_q8_1(const void* src, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockQ8_1*>(src);
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

// ---- integer levels (see LevelsFn): two groups of 16 per block, both with the block's scale --

namespace {

// The block's 32 levels are in q already; its scale d and offset m go to both groups.
void block_scales(float d, float m, float* scale, float* offset) {
  scale[0] = scale[1] = d;
  offset[0] = offset[1] = m;
}

}  // namespace

void levels_q4_0(const void* src, int8_t* q, float* scale, float* offset, int64_t nb) {
  const auto* b = static_cast<const BlockQ4_0*>(src);
  for (int64_t i = 0; i < nb; ++i, q += kQK, scale += 2, offset += 2) {
    for (int j = 0; j < kQK / 2; ++j) {
      q[j] = static_cast<int8_t>((b[i].qs[j] & 0x0F) - 8);
      q[j + kQK / 2] = static_cast<int8_t>((b[i].qs[j] >> 4) - 8);
    }
    block_scales(fp16_to_fp32(b[i].d), 0.0f, scale, offset);
  }
}

void levels_q4_1(const void* src, int8_t* q, float* scale, float* offset, int64_t nb) {
  const auto* b = static_cast<const BlockQ4_1*>(src);
  for (int64_t i = 0; i < nb; ++i, q += kQK, scale += 2, offset += 2) {
    for (int j = 0; j < kQK / 2; ++j) {
      q[j] = static_cast<int8_t>(b[i].qs[j] & 0x0F);
      q[j + kQK / 2] = static_cast<int8_t>(b[i].qs[j] >> 4);
    }
    block_scales(fp16_to_fp32(b[i].d), fp16_to_fp32(b[i].m), scale, offset);
  }
}

void levels_q5_0(const void* src, int8_t* q, float* scale, float* offset, int64_t nb) {
  const auto* b = static_cast<const BlockQ5_0*>(src);
  for (int64_t i = 0; i < nb; ++i, q += kQK, scale += 2, offset += 2) {
    const uint32_t qh = load_qh(b[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      q[j] = static_cast<int8_t>(((b[i].qs[j] & 0x0F) | high_bit_lo(qh, j)) - 16);
      q[j + kQK / 2] = static_cast<int8_t>(((b[i].qs[j] >> 4) | high_bit_hi(qh, j)) - 16);
    }
    block_scales(fp16_to_fp32(b[i].d), 0.0f, scale, offset);
  }
}

void levels_q5_1(const void* src, int8_t* q, float* scale, float* offset, int64_t nb) {
  const auto* b = static_cast<const BlockQ5_1*>(src);
  for (int64_t i = 0; i < nb; ++i, q += kQK, scale += 2, offset += 2) {
    const uint32_t qh = load_qh(b[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      q[j] = static_cast<int8_t>((b[i].qs[j] & 0x0F) | high_bit_lo(qh, j));
      q[j + kQK / 2] = static_cast<int8_t>((b[i].qs[j] >> 4) | high_bit_hi(qh, j));
    }
    block_scales(fp16_to_fp32(b[i].d), fp16_to_fp32(b[i].m), scale, offset);
  }
}

void levels_q8_0(const void* src, int8_t* q, float* scale, float* offset, int64_t nb) {
  const auto* b = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < nb; ++i, q += kQK, scale += 2, offset += 2) {
    std::copy_n(b[i].qs, kQK, q);
    block_scales(fp16_to_fp32(b[i].d), 0.0f, scale, offset);
  }
}

// ---- quantization (ggml's *_ref functions, which llama-quantize uses without an imatrix) ----
// The (int8_t) truncations below are ggml's: x*id + 8.5 is >= 0.5 by construction, so
// truncation rounds half up; the MIN(15/31) only catches the one value that lands on 16/32.

void quantize_q4_0(const float* x, void* dst, int64_t nb) {
  auto* b = static_cast<BlockQ4_0*>(dst);
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float d = signed_absmax(x) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      const float x0 = x[j] * id;
      const float x1 = x[j + kQK / 2] * id;
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>(x0 + 8.5f)));
      const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>(x1 + 8.5f)));
      b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void quantize_q4_1(const float* x, void* dst, int64_t nb) {
  auto* b = static_cast<BlockQ4_1*>(dst);
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float min, max;
    min_max(x, min, max);
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = fp32_to_fp16(d);
    b[i].m = fp32_to_fp16(min);
    for (int j = 0; j < kQK / 2; ++j) {
      const float x0 = (x[j] - min) * id;
      const float x1 = (x[j + kQK / 2] - min) * id;
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>(x0 + 0.5f)));
      const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>(x1 + 0.5f)));
      b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void quantize_q5_0(const float* x, void* dst, int64_t nb) {
  auto* b = static_cast<BlockQ5_0*>(dst);
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float d = signed_absmax(x) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = fp32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const float x0 = x[j] * id;
      const float x1 = x[j + kQK / 2] * id;
      const uint32_t q0 = static_cast<uint32_t>(std::min(31, static_cast<int>(static_cast<int8_t>(x0 + 16.5f))));
      const uint32_t q1 = static_cast<uint32_t>(std::min(31, static_cast<int>(static_cast<int8_t>(x1 + 16.5f))));
      b[i].qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
      qh |= ((q0 >> 4) & 1u) << j;
      qh |= ((q1 >> 4) & 1u) << (j + kQK / 2);
    }
    std::memcpy(b[i].qh, &qh, sizeof qh);
  }
}

void quantize_q5_1(const float* x, void* dst, int64_t nb) {
  auto* b = static_cast<BlockQ5_1*>(dst);
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float min, max;
    min_max(x, min, max);
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = fp32_to_fp16(d);
    b[i].m = fp32_to_fp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const float x0 = (x[j] - min) * id;
      const float x1 = (x[j + kQK / 2] - min) * id;
      // No clamp, as in ggml: (max - min) * id is 31 give or take an ulp, so x + 0.5 < 32.
      const uint32_t q0 = static_cast<uint8_t>(x0 + 0.5f);
      const uint32_t q1 = static_cast<uint8_t>(x1 + 0.5f);
      b[i].qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
      qh |= ((q0 >> 4) & 1u) << j;
      qh |= ((q1 >> 4) & 1u) << (j + kQK / 2);
    }
    std::memcpy(b[i].qh, &qh, sizeof qh);
  }
}

void quantize_q8_0(const float* x, void* dst, int64_t nb) {
  auto* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float d = absmax(x) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = fp32_to_fp16(d);
    // roundf: halves away from zero, as llama-quantize writes weights (activations:
    // quantize_q8_0_activations).
    for (int j = 0; j < kQK; ++j) b[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

// Activations, as ggml's x86 backend rounds them (its SIMD quantize_row_q8_0, which llama.cpp
// runs on every x86 CPU): id = 127/amax rather than 1/d, halves to even. The two differ from the
// reference in rare last bits, and one int8 the other way can flip a mixture's expert.
void quantize_q8_0_activations(const float* x, void* dst, int64_t nb) {
  auto* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float amax = absmax(x);
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    b[i].d = fp32_to_fp16(amax / 127.0f);
    for (int j = 0; j < kQK; ++j) b[i].qs[j] = static_cast<int8_t>(nearest_int(x[j] * id));
  }
}

// Q8_1 only ever holds activations: ggml's x86 rounding, as quantize_q8_0_activations.
void quantize_q8_1(const float* x, void* dst, int64_t nb) {
  auto* b = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float amax = absmax(x);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    b[i].d = fp32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      b[i].qs[j] = static_cast<int8_t>(nearest_int(x[j] * id));
      sum += b[i].qs[j];
    }
    // s uses the unrounded float d, not the stored half (ggml's quantize_row_q8_1_ref).
    b[i].s = fp32_to_fp16(static_cast<float>(sum) * d);
  }
}

// ---- dot products with the activation format ----------------------------------------------
// Integer sums per block, one float multiply-add per block, as ggml's generic vec_dot.

float vec_dot_q4_0_q8_0(const void* w, const void* xq, int64_t nb) {
  const auto* a = static_cast<const BlockQ4_0*>(w);
  const auto* x = static_cast<const BlockQ8_0*>(xq);
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      sumi += ((a[i].qs[j] & 0x0F) - 8) * x[i].qs[j];
      sumi += ((a[i].qs[j] >> 4) - 8) * x[i].qs[j + kQK / 2];
    }
    sum += static_cast<float>(sumi) * fp16_to_fp32(a[i].d) * fp16_to_fp32(x[i].d);
  }
  return sum;
}

float vec_dot_q4_1_q8_1(const void* w, const void* xq, int64_t nb) {
  const auto* a = static_cast<const BlockQ4_1*>(w);
  const auto* x = static_cast<const BlockQ8_1*>(xq);
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      sumi += (a[i].qs[j] & 0x0F) * x[i].qs[j];
      sumi += (a[i].qs[j] >> 4) * x[i].qs[j + kQK / 2];
    }
    // sum(w*x) = d_w*d_x*sum(q_w*q_x) + m_w * (d_x*sum(q_x)), the last factor being s.
    sum += (fp16_to_fp32(a[i].d) * fp16_to_fp32(x[i].d)) * static_cast<float>(sumi) +
           fp16_to_fp32(a[i].m) * fp16_to_fp32(x[i].s);
  }
  return sum;
}

float vec_dot_q5_0_q8_0(const void* w, const void* xq, int64_t nb) {
  const auto* a = static_cast<const BlockQ5_0*>(w);
  const auto* x = static_cast<const BlockQ8_0*>(xq);
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    const uint32_t qh = load_qh(a[i].qh);
    int sumi = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = ((a[i].qs[j] & 0x0F) | high_bit_lo(qh, j)) - 16;
      const int q1 = ((a[i].qs[j] >> 4) | high_bit_hi(qh, j)) - 16;
      sumi += q0 * x[i].qs[j] + q1 * x[i].qs[j + kQK / 2];
    }
    sum += (fp16_to_fp32(a[i].d) * fp16_to_fp32(x[i].d)) * static_cast<float>(sumi);
  }
  return sum;
}

float vec_dot_q5_1_q8_1(const void* w, const void* xq, int64_t nb) {
  const auto* a = static_cast<const BlockQ5_1*>(w);
  const auto* x = static_cast<const BlockQ8_1*>(xq);
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    const uint32_t qh = load_qh(a[i].qh);
    int sumi = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = (a[i].qs[j] & 0x0F) | high_bit_lo(qh, j);
      const int q1 = (a[i].qs[j] >> 4) | high_bit_hi(qh, j);
      sumi += q0 * x[i].qs[j] + q1 * x[i].qs[j + kQK / 2];
    }
    sum += (fp16_to_fp32(a[i].d) * fp16_to_fp32(x[i].d)) * static_cast<float>(sumi) +
           fp16_to_fp32(a[i].m) * fp16_to_fp32(x[i].s);
  }
  return sum;
}

float vec_dot_q8_0_q8_0(const void* w, const void* xq, int64_t nb) {
  const auto* a = static_cast<const BlockQ8_0*>(w);
  const auto* x = static_cast<const BlockQ8_0*>(xq);
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK; ++j) sumi += a[i].qs[j] * x[i].qs[j];
    sum += static_cast<float>(sumi) * (fp16_to_fp32(a[i].d) * fp16_to_fp32(x[i].d));
  }
  return sum;
}

}  // namespace orchard::detail
