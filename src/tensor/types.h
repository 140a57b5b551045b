#pragma once
// Tensor element formats, numbered as in GGUF/ggml so type ids read straight from files.
#include <cstddef>
#include <cstdint>
#include <string>

namespace orchard {

enum class DType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35,
};

struct TypeInfo {
  const char* name;
  int64_t block_elems;   // elements per block (1 for plain scalars)
  size_t block_bytes;    // bytes per block
  bool computable;       // Orchard can dequantize it and multiply with it
};

// nullptr when `id` is not a known GGUF type id at all.
const TypeInfo* type_info(uint32_t id);
const TypeInfo& type_info(DType t);
const char* type_name(DType t);
// Parses "Q4_0", "f16", … (case-insensitive); throws orchard::Error naming the text.
DType parse_type(const std::string& name);
// Bytes used by `n` consecutive elements; throws when n is not a multiple of the block size.
size_t row_bytes(DType t, int64_t n);

}  // namespace orchard
