// Dispatch from a DType to its kernels, plus the three plain float formats.  Each format has one
// row of the table below; a faster kernel for a format (SIMD, repacked layouts) replaces the
// function pointer in its row and nothing else changes.
#include "tensor/quant.h"

#include <cstring>
#include <string>

#include "tensor/error.h"
#include "tensor/f16.h"
#include "tensor/quant_blocks.h"

namespace orchard {
namespace {

using detail::DequantizeFn;
using detail::QuantizeFn;
using detail::VecDotFn;

// ---- F32 / F16 / BF16 (block size 1, so `nb` is an element count) ----------------------------

void dequantize_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
void quantize_f32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void dequantize_f16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
}
void quantize_f16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(src[i]);
}

void dequantize_bf16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(h[i]);
}
void quantize_bf16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_bf16(src[i]);
}

// Float dot products accumulate in double, like ggml's scalar ggml_vec_dot_f32/f16/bf16
// (ggml_float): each product is rounded to float first (exact for f16*f16 and bf16*bf16,
// whose 11- and 8-bit significands multiply into fewer than 24 bits), the sum is not.
float vec_dot_f32(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const float*>(w);
  const auto* b = static_cast<const float*>(x);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(a[i] * b[i]);
  return static_cast<float>(sum);
}

float vec_dot_f16(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const uint16_t*>(w);
  const auto* b = static_cast<const uint16_t*>(x);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(fp16_to_fp32(a[i]) * fp16_to_fp32(b[i]));
  return static_cast<float>(sum);
}

float vec_dot_bf16(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const uint16_t*>(w);
  const auto* b = static_cast<const uint16_t*>(x);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(bf16_to_fp32(a[i]) * bf16_to_fp32(b[i]));
  return static_cast<float>(sum);
}

// ---- the table ------------------------------------------------------------------------------

struct Kernels {
  DType type;
  DType dot_type;           // activations are converted to this before vec_dot
  DequantizeFn dequantize;  // nullptr: not readable
  QuantizeFn quantize;      // nullptr: we do not write this format
  VecDotFn vec_dot;         // nullptr: not usable as a weight
  detail::LevelsFn levels = nullptr;  // nullptr: no integer-levels form (row_levels)
};

// ggml's type_traits_cpu pairing of weight formats with activation formats.
constexpr Kernels kKernels[] = {
    {DType::F32, DType::F32, dequantize_f32, quantize_f32, vec_dot_f32},
    {DType::F16, DType::F16, dequantize_f16, quantize_f16, vec_dot_f16},
    {DType::BF16, DType::BF16, dequantize_bf16, quantize_bf16, vec_dot_bf16},
    {DType::Q4_0, DType::Q8_0, detail::dequantize_q4_0, detail::quantize_q4_0, detail::vec_dot_q4_0_q8_0,
     detail::levels_q4_0},
    {DType::Q4_1, DType::Q8_1, detail::dequantize_q4_1, detail::quantize_q4_1, detail::vec_dot_q4_1_q8_1,
     detail::levels_q4_1},
    {DType::Q5_0, DType::Q8_0, detail::dequantize_q5_0, detail::quantize_q5_0, detail::vec_dot_q5_0_q8_0,
     detail::levels_q5_0},
    {DType::Q5_1, DType::Q8_1, detail::dequantize_q5_1, detail::quantize_q5_1, detail::vec_dot_q5_1_q8_1,
     detail::levels_q5_1},
    {DType::Q8_0, DType::Q8_0, detail::dequantize_q8_0, detail::quantize_q8_0, detail::vec_dot_q8_0_q8_0,
     detail::levels_q8_0},
    // Q8_1 only ever holds activations: no weight dot product.
    {DType::Q8_1, DType::Q8_1, detail::dequantize_q8_1, detail::quantize_q8_1, nullptr},
    {DType::Q2_K, DType::Q8_K, detail::dequantize_q2_k, nullptr, detail::vec_dot_q2_k_q8_k},
    {DType::Q3_K, DType::Q8_K, detail::dequantize_q3_k, nullptr, detail::vec_dot_q3_k_q8_k},
    {DType::Q4_K, DType::Q8_K, detail::dequantize_q4_k, detail::quantize_q4_k, detail::vec_dot_q4_k_q8_k,
     detail::levels_q4_k},
    {DType::Q5_K, DType::Q8_K, detail::dequantize_q5_k, detail::quantize_q5_k, detail::vec_dot_q5_k_q8_k,
     detail::levels_q5_k},
    {DType::Q6_K, DType::Q8_K, detail::dequantize_q6_k, detail::quantize_q6_k, detail::vec_dot_q6_k_q8_k,
     detail::levels_q6_k},
    {DType::Q8_K, DType::Q8_K, detail::dequantize_q8_k, detail::quantize_q8_k, detail::vec_dot_q8_k_q8_k},
};

std::string describe(DType t) {
  return std::string(type_name(t)) + " (type " + std::to_string(static_cast<uint32_t>(t)) + ")";
}

const Kernels& kernels(DType t, const char* what) {
  for (const auto& k : kKernels)
    if (k.type == t) return k;
  throw Error(std::string(what) + ": tensor type " + describe(t) + " is not supported");
}

// Number of blocks in n elements; Error when n is negative or not whole blocks.
int64_t block_count(DType t, int64_t n, const char* what) {
  const TypeInfo& info = type_info(t);
  if (n < 0 || n % info.block_elems != 0)
    throw Error(std::string(what) + ": " + std::to_string(n) + " elements is not a whole number of " +
                describe(t) + " blocks of " + std::to_string(info.block_elems));
  return n / info.block_elems;
}

}  // namespace

namespace detail {
VecDotFn find_vec_dot(DType w) {
  const Kernels& k = kernels(w, "vec_dot");
  if (!k.vec_dot) throw Error("vec_dot: " + describe(w) + " cannot be used as weights");
  return k.vec_dot;
}
}  // namespace detail

DType vec_dot_type(DType w) {
  const Kernels& k = kernels(w, "vec_dot_type");
  if (!k.vec_dot) throw Error("vec_dot_type: " + describe(w) + " cannot be used as weights");
  return k.dot_type;
}

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  const Kernels& k = kernels(t, "dequantize_row");
  k.dequantize(src, dst, block_count(t, n, "dequantize_row"));
}

bool row_levels(DType t, const void* src, int8_t* q, float* scale, float* offset, int64_t n) {
  const Kernels& k = kernels(t, "row_levels");
  if (!k.levels) return false;
  const int64_t nb = block_count(t, n, "row_levels");
  if (n % 16 != 0) return false;
  k.levels(src, q, scale, offset, nb);
  return true;
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  const Kernels& k = kernels(t, "quantize_row");
  if (!k.quantize) throw Error("quantize_row: quantizing to " + describe(t) + " is not supported");
  k.quantize(src, dst, block_count(t, n, "quantize_row"));
}

void quantize_activations(DType t, const float* src, void* dst, int64_t n) {
  if (t == DType::Q8_0)
    detail::quantize_q8_0_activations(src, dst, block_count(t, n, "quantize_activations"));
  else
    quantize_row(t, src, dst, n);
}

float vec_dot(DType w_type, const void* w, const void* xq, int64_t n) {
  const VecDotFn dot = detail::find_vec_dot(w_type);
  return dot(w, xq, block_count(w_type, n, "vec_dot"));
}

}  // namespace orchard
