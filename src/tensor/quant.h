#pragma once
// Block formats: dequantization, quantization and the scalar reference dot products.
//
// Dot products follow ggml's scheme so logits match llama.cpp closely: a weight row of type W is
// multiplied with activations first converted to vec_dot_type(W) (Q8_0 for Q4_0/Q5_0/Q8_0, Q8_1
// for Q4_1/Q5_1, Q8_K for the K-quants, F16 for F16, BF16 for BF16, F32 for F32).
#include <cstddef>
#include <cstdint>

#include "tensor/types.h"

namespace orchard {

// The format activations are converted to before a dot product with weights of type `w`.
DType vec_dot_type(DType w);

// dst[0..n) = the values of `n` elements stored at `src` in format `t`.
// Throws orchard::Error for types that are not computable or n not a multiple of the block.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);

// The n elements at `src` as integer levels with a scale and an offset per 16 elements:
// dequantize_row's value of element i is exactly scale[i/16]·q[i] + offset[i/16] (both
// products rounded once, in float). False (nothing written) for formats without that form:
// the float formats, Q2_K, Q3_K.
bool row_levels(DType t, const void* src, int8_t* q, float* scale, float* offset, int64_t n);

// Stores n floats in format `t` (F32, F16, BF16, Q8_0, Q8_1, Q8_K, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K,
// Q5_K, Q6_K).
// Rounding follows ggml's reference quantizers so files we write load identically elsewhere.
void quantize_row(DType t, const float* src, void* dst, int64_t n);

// Stores a product's input of n floats in t = vec_dot_type(weights), rounded as llama.cpp's x86
// backend rounds activations (Q8_0 and Q8_1: q = round-half-even(x · 127/amax), not the weight
// quantizer's roundf(x / d); other formats as quantize_row). Every ISA's kernels match it, so a
// token's bits do not depend on the CPU.
void quantize_activations(DType t, const float* src, void* dst, int64_t n);

// sum_i w[i] * x[i], where w holds n elements of type `w_type` and xq holds the same n elements
// of activations already in vec_dot_type(w_type).
float vec_dot(DType w_type, const void* w, const void* xq, int64_t n);

}  // namespace orchard
