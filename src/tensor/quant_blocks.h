#pragma once
// Internal: ggml's on-disk block layouts (ggml-common.h) and the per-format kernels that
// quant.cpp dispatches to.  Structs are byte-for-byte the GGUF layouts, so tensor bytes from a
// mapped file are read through them directly; every field is 1- or 2-byte aligned except Q8_K's
// float, and GGUF aligns tensor data to 32 bytes.
#include <cstdint>
#include <cstring>

#include "tensor/types.h"

namespace orchard::detail {

inline constexpr int kQK = 32;    // elements per Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/Q8_1 block
inline constexpr int kQK_K = 256;  // elements per K-quant super-block

// x ≈ d * (q - 8), q in 0..15; element j in the low nibble of qs[j], j+16 in the high nibble.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
// x ≈ d * q + m.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};
// Q4_0 plus a fifth bit per element: bit j of the little-endian word qh belongs to element j.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
// Activation format for Q4_1/Q5_1: s = d * sum(qs) lets the weight's offset m be applied once.
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[kQK];
};

// 16 sub-blocks of 16; scales[i] holds a 4-bit scale (low) and a 4-bit min (high).
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d;
  uint16_t dmin;
};
// 2 low bits in qs, the third bit in hmask; 16 6-bit signed scales packed into 12 bytes.
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  uint16_t d;
};
// 8 sub-blocks of 32 with 6-bit scales and mins packed into 12 bytes.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
// 16 sub-blocks of 16 with signed 8-bit scales; q = (4 low bits | 2 high bits) - 32.
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
// Activation format for the K-quants; bsums (sums of 16 consecutive qs) serve the mins.
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);

// ggml's nearest_int: adding 1.5*2^23 leaves round-to-nearest-even(f) in the low mantissa bits
// (valid for |f| < 2^22, which the callers guarantee).
inline int nearest_int(float f) {
  const float v = f + 12582912.0f;
  int32_t i;
  std::memcpy(&i, &v, sizeof i);
  return (i & 0x007FFFFF) - 0x00400000;
}

// Q4_K/Q5_K: eight 6-bit scales and mins in 12 bytes (ggml's get_scale_min_k4): entries 0-3 in
// the low 6 bits of bytes 0-3 (scales) and 4-7 (mins); entries 4-7 take their low nibbles from
// bytes 8-11 and their top two bits from the spare bits 6-7 of bytes 0-7.
inline void scale_min_k4(int j, const uint8_t* q, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Kernel signatures: `nb` is a count of blocks, never of elements.
using DequantizeFn = void (*)(const void* src, float* dst, int64_t nb);
// A block's values as integer levels q (one int8 per element) with a scale and an offset per 16
// elements: value = scale·q + offset, the dequantizer's float exactly.
using LevelsFn = void (*)(const void* src, int8_t* q, float* scale, float* offset, int64_t nb);
using QuantizeFn = void (*)(const float* src, void* dst, int64_t nb);
using VecDotFn = float (*)(const void* w, const void* xq, int64_t nb);

// quant.cpp: the dot kernel for weights of type `w`; throws orchard::Error when there is none.
// matmul looks it up once per matrix instead of once per row.
VecDotFn find_vec_dot(DType w);

// quant_legacy.cpp
void dequantize_q4_0(const void* src, float* dst, int64_t nb);
void dequantize_q4_1(const void* src, float* dst, int64_t nb);
void dequantize_q5_0(const void* src, float* dst, int64_t nb);
void dequantize_q5_1(const void* src, float* dst, int64_t nb);
void dequantize_q8_0(const void* src, float* dst, int64_t nb);
void dequantize_q8_1(const void* src, float* dst, int64_t nb);
void levels_q4_0(const void* src, int8_t* q, float* scale, float* offset, int64_t nb);
void levels_q4_1(const void* src, int8_t* q, float* scale, float* offset, int64_t nb);
void levels_q5_0(const void* src, int8_t* q, float* scale, float* offset, int64_t nb);
void levels_q5_1(const void* src, int8_t* q, float* scale, float* offset, int64_t nb);
void levels_q8_0(const void* src, int8_t* q, float* scale, float* offset, int64_t nb);
void quantize_q4_0(const float* src, void* dst, int64_t nb);
void quantize_q4_1(const float* src, void* dst, int64_t nb);
void quantize_q5_0(const float* src, void* dst, int64_t nb);
void quantize_q5_1(const float* src, void* dst, int64_t nb);
void quantize_q8_0(const float* src, void* dst, int64_t nb);
void quantize_q8_0_activations(const float* src, void* dst, int64_t nb);
void quantize_q8_1(const float* src, void* dst, int64_t nb);
float vec_dot_q4_0_q8_0(const void* w, const void* xq, int64_t nb);
float vec_dot_q4_1_q8_1(const void* w, const void* xq, int64_t nb);
float vec_dot_q5_0_q8_0(const void* w, const void* xq, int64_t nb);
float vec_dot_q5_1_q8_1(const void* w, const void* xq, int64_t nb);
float vec_dot_q8_0_q8_0(const void* w, const void* xq, int64_t nb);

// quant_k.cpp
void dequantize_q2_k(const void* src, float* dst, int64_t nb);
void dequantize_q3_k(const void* src, float* dst, int64_t nb);
void dequantize_q4_k(const void* src, float* dst, int64_t nb);
void dequantize_q5_k(const void* src, float* dst, int64_t nb);
void dequantize_q6_k(const void* src, float* dst, int64_t nb);
void dequantize_q8_k(const void* src, float* dst, int64_t nb);
void levels_q4_k(const void* src, int8_t* q, float* scale, float* offset, int64_t nb);
void levels_q5_k(const void* src, int8_t* q, float* scale, float* offset, int64_t nb);
void levels_q6_k(const void* src, int8_t* q, float* scale, float* offset, int64_t nb);
void quantize_q8_k(const float* src, void* dst, int64_t nb);
// llama-quantize's K-quants without an importance matrix (quantize_k.cpp).
void quantize_q4_k(const float* src, void* dst, int64_t nb);
void quantize_q5_k(const float* src, void* dst, int64_t nb);
void quantize_q6_k(const float* src, void* dst, int64_t nb);
float vec_dot_q2_k_q8_k(const void* w, const void* xq, int64_t nb);
float vec_dot_q3_k_q8_k(const void* w, const void* xq, int64_t nb);
float vec_dot_q4_k_q8_k(const void* w, const void* xq, int64_t nb);
float vec_dot_q5_k_q8_k(const void* w, const void* xq, int64_t nb);
float vec_dot_q6_k_q8_k(const void* w, const void* xq, int64_t nb);
float vec_dot_q8_k_q8_k(const void* w, const void* xq, int64_t nb);

}  // namespace orchard::detail
